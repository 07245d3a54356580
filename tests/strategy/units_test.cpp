#include "base/units.h"

#include <gtest/gtest.h>

namespace parlab::units {

TEST(Units, DecimalBytesKeepTheirPrefix) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(12.6e6), "12.6 MB");
  EXPECT_EQ(format_bytes(130e9), "130 GB");
  EXPECT_EQ(format_bytes(1.5e9), "1.50 GB");
}

TEST(Units, LinkBandwidthFromBits) {
  // 200 Gb/s HDR InfiniBand carries 25 GB/s.
  EXPECT_DOUBLE_EQ(200 * kGbit_per_s, 25e9);
  EXPECT_EQ(format_bytes_per_s(200 * kGbit_per_s), "25.0 GB/s");
}

TEST(Units, Seconds) {
  EXPECT_EQ(format_seconds(1.234), "1.23 s");
  EXPECT_EQ(format_seconds(0.035), "35 ms");
  EXPECT_EQ(format_seconds(4.1e-6), "4.1 us");
}

}  // namespace parlab::units
