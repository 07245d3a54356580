#pragma once
// Units. Names carry their unit (bytes, flops, seconds, bytes_per_s); decimal and binary prefixes
// are kept apart: GB is 1e9 bytes, GiB is 2^30 bytes, and printed output says which.
#include <cstdint>
#include <string>

namespace parlab::units {

inline constexpr double kKB = 1e3, kMB = 1e6, kGB = 1e9, kTB = 1e12;
inline constexpr double kKiB = 1024.0, kMiB = 1024.0 * 1024, kGiB = 1024.0 * 1024 * 1024;
inline constexpr double kGiga = 1e9, kTera = 1e12;
// Network links are quoted in bits per second (200 Gb/s HDR InfiniBand = 25 GB/s).
inline constexpr double kGbit_per_s = 1e9 / 8;

// "12.6 MB", "1.50 GB", "512 B": decimal units, three significant digits.
std::string format_bytes(double bytes);
// "1.2 s", "35.0 ms", "4.1 us".
std::string format_seconds(double seconds);
// "67.2M", "175B", "1.00T": a count (parameters, samples) with a decimal suffix.
std::string format_count(double count);
// "312 TFLOP/s".
std::string format_flops_per_s(double flops_per_s);
// "25.0 GB/s".
std::string format_bytes_per_s(double bytes_per_s);

}  // namespace parlab::units
