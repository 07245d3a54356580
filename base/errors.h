#pragma once
// Typed errors shared by every parlab library. Library code throws; the CLI and the GUI catch at
// the edge and print one line. Nothing below the edge calls exit().
#include <stdexcept>
#include <string>

namespace parlab {

// Base of every error parlab raises on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user (a flag, a TOML key, a plan field). The message names the field, the
// value that was given and what is allowed, e.g.
//   "plan.tp = 3: must divide heads (96) and ffn (49152)".
class ConfigError : public Error {
 public:
  ConfigError(std::string field, std::string value, std::string allowed)
      : Error(field + " = " + value + ": " + allowed),
        field_(std::move(field)),
        value_(std::move(value)),
        allowed_(std::move(allowed)) {}
  const std::string& field() const { return field_; }
  const std::string& value() const { return value_; }
  const std::string& allowed() const { return allowed_; }

 private:
  std::string field_, value_, allowed_;
};

// Something outside the user's input failed: a file could not be written, a peer vanished.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

}  // namespace parlab
