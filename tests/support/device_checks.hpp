#pragma once
// What the device tests share: the message of an expected error, and polling an event without ordering
// anything.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "nj/core/error.hpp"
#include "nj/device/device.hpp"

namespace nj::test {

// The message of the E that `fn` throws; a test failure when it throws nothing.
template <typename E = Error, typename Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

inline testing::AssertionResult mentions(const std::string& message, std::string_view part) {
  if (message.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "'" << message << "' does not mention '" << part << "'";
}

// Polling orders nothing (unlike synchronize, which tells every stream the host saw the event complete) and
// never runs a copy on the calling thread, so only an engine thread can make this return true. False after
// 30 s.
inline bool poll_until_complete(Device& device, const Event& event) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!device.is_complete(event)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace nj::test
