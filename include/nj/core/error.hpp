#pragma once
// Error handling: every failure is an nj::Error carrying what went wrong and where. Library code never
// exits; the CLI catches, prints one line and returns non-zero (under MPI it aborts the whole job).
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace nj {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (files, flags, configs): the message alone is meaningful to a user.
class InputError : public Error {
 public:
  using Error::Error;
};

// A mistake in the command line itself (an option's value, options that do not go together), as opposed to what
// the files or the machine turn out to hold: the command line exits with 2 for it, as for what it cannot parse.
class UsageError : public InputError {
 public:
  using InputError::InputError;
};

// A device allocation beyond the memory budget.
class OutOfBudget : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_internal(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace nj

// Internal invariant: throws nj::Error naming the file, line and failed condition.
#define NJ_EXPECTS(cond, ...)                                                                       \
  do {                                                                                              \
    if (!(cond)) ::nj::detail::throw_internal(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (false)

// A check of the command line: throws nj::UsageError with only the formatted message.
#define NJ_USAGE(cond, ...)                                        \
  do {                                                             \
    if (!(cond)) throw ::nj::UsageError(fmt::format(__VA_ARGS__)); \
  } while (false)

// User-facing check: throws nj::InputError with only the formatted message.
#define NJ_REQUIRE(cond, ...)                                      \
  do {                                                             \
    if (!(cond)) throw ::nj::InputError(fmt::format(__VA_ARGS__)); \
  } while (false)
