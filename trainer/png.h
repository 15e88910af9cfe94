// A minimal PNG writer (8-bit RGB, no compression: zlib "stored" deflate blocks, CRC-32 and
// Adler-32 computed here) and the loss-curve plot `dskc train` writes at the end.
// Invariant: encode_png output is a valid PNG any decoder reads (signature, IHDR, IDAT, IEND).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dskc {

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);
uint32_t adler32(const uint8_t* data, size_t n);

// rgb: width × height × 3 bytes, rows top to bottom. Returns the PNG file bytes.
std::string encode_png(int width, int height, const std::vector<uint8_t>& rgb);

struct CurveSeries {
  std::string label;
  std::vector<double> x, y;
  uint8_t r = 0, g = 0, b = 0;
};

// Draws the series as polylines on a white canvas with axes, tick marks and numeric labels for
// the x (step) and y (loss) ranges, and a legend. Returns PNG bytes.
std::string plot_curves(const std::vector<CurveSeries>& series, int width = 800, int height = 500);

}  // namespace dskc
