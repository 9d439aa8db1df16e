#pragma once
// Waiting for something another process does (a file appears, a compile
// starts) without sleeping a fixed time: poll the condition until it holds or
// a deadline passes. The caller asserts the result, so a wait that ran out
// fails the test at that point instead of letting it go on with a false
// premise.

#include <chrono>
#include <functional>

namespace npc::test {

// How often wait_until looks again by default.
inline constexpr std::chrono::milliseconds kWaitPoll{5};

// True as soon as `condition` holds; false when it still does not after
// `timeout` (it is looked at once more at the end).
[[nodiscard]] bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                              std::chrono::milliseconds poll = kWaitPoll);

} // namespace npc::test
