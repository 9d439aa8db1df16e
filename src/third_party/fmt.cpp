// fmt's compiled part, built into our programs instead of loaded from
// libfmt.so. Every cache hit starts a new neuron_cc_wrapper, and each shared
// library costs that start its mapping and relocations; with libspdlog.so
// and libfmt.so gone, no shared C++ library is left and libstdc++ can be
// linked statically too (the programs' CMakeLists.txt). As fmt's own
// src/format.cc does: its definitions, and the instantiations it exports.

#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);

} // namespace detail
FMT_END_NAMESPACE
