// fmt's compiled part, built into our programs instead of loaded from
// libfmt.so. Every cache hit starts a new neuron_cc_wrapper, and each shared
// library costs that start its mapping and relocations; with libspdlog.so
// and libfmt.so gone, no shared C++ library is left and libstdc++ can be
// linked statically too (the programs' CMakeLists.txt). As fmt's own
// src/format.cc does: its definitions, and the instantiations it exports.

#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
#if FMT_VERSION >= 90000
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);

} // namespace detail
#else // fmt 7 (Debian 11): its src/format.cc's instantiations
namespace detail {
template FMT_API dragonbox::decimal_fp<float> dragonbox::to_decimal(float x) FMT_NOEXCEPT;
template FMT_API dragonbox::decimal_fp<double> dragonbox::to_decimal(double x) FMT_NOEXCEPT;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API std::locale locale_ref::get<std::locale>() const;
template struct FMT_INSTANTIATION_DEF_API basic_data<void>;
template FMT_API std::string grouping_impl<char>(locale_ref);
template FMT_API char thousands_sep_impl(locale_ref);
template FMT_API char decimal_point_impl(locale_ref);
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view,
                                 basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);
template FMT_API int snprintf_float(double, int, float_specs, buffer<char>&);
template FMT_API int snprintf_float(long double, int, float_specs, buffer<char>&);
template FMT_API int format_float(double, int, float_specs, buffer<char>&);
template FMT_API int format_float(long double, int, float_specs, buffer<char>&);
} // namespace detail
#endif
FMT_END_NAMESPACE
