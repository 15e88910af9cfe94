// PNG encoding (stored deflate) and the loss-curve plot (see png.h). Text uses a built-in 3×5
// pixel font drawn at 2× scale: digits, letters (upper-case shapes), and . - + ( ) , :
#include "trainer/png.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

namespace dskc {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xFF));
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, crc32(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

const char* glyph(char c) {  // 15 chars: 5 rows of 3, 'X' = ink
  switch (std::toupper(static_cast<unsigned char>(c))) {
    case '0': return "XXXX.XX.XX.XXXX";
    case '1': return ".X.XX..X..X.XXX";
    case '2': return "XXX..XXXXX..XXX";
    case '3': return "XXX..XXXX..XXXX";
    case '4': return "X.XX.XXXX..X..X";
    case '5': return "XXXX..XXX..XXXX";
    case '6': return "XXXX..XXXX.XXXX";
    case '7': return "XXX..X..X..X..X";
    case '8': return "XXXX.XXXXX.XXXX";
    case '9': return "XXXX.XXXX..XXXX";
    case '.': return ".............X.";
    case '-': return "......XXX......";
    case '+': return "....X.XXX.X....";
    case '(': return ".X.X..X..X...X.";
    case ')': return ".X...X..X..X.X.";
    case ',': return ".........X.X...";
    case ':': return "....X.....X....";
    case 'A': return ".X.X.XXXXX.XX.X";
    case 'B': return "XX.X.XXX.X.XXX.";
    case 'C': return ".XXX..X..X...XX";
    case 'D': return "XX.X.XX.XX.XXX.";
    case 'E': return "XXXX..XX.X..XXX";
    case 'F': return "XXXX..XX.X..X..";
    case 'G': return ".XXX..X.XX.X.XX";
    case 'H': return "X.XX.XXXXX.XX.X";
    case 'I': return "XXX.X..X..X.XXX";
    case 'J': return "..X..X..XX.X.X.";
    case 'K': return "X.XX.XXX.X.XX.X";
    case 'L': return "X..X..X..X..XXX";
    case 'M': return "X.XXXXXXXX.XX.X";
    case 'N': return "XX.X.XX.XX.XX.X";
    case 'O': return ".X.X.XX.XX.X.X.";
    case 'P': return "XX.X.XXX.X..X..";
    case 'Q': return ".X.X.XX.XXX..XX";
    case 'R': return "XX.X.XXX.X.XX.X";
    case 'S': return ".XXX...X...XXX.";
    case 'T': return "XXX.X..X..X..X.";
    case 'U': return "X.XX.XX.XX.XXXX";
    case 'V': return "X.XX.XX.XX.X.X.";
    case 'W': return "X.XX.XXXXXXXX.X";
    case 'X': return "X.XX.X.X.X.XX.X";
    case 'Y': return "X.XX.X.X..X..X.";
    case 'Z': return "XXX..X.X.X..XXX";
    default: return "...............";
  }
}

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), rgb_(static_cast<size_t>(w) * h * 3, 255) {}
  void set(int x, int y, uint8_t r, uint8_t g, uint8_t b) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    uint8_t* p = &rgb_[(static_cast<size_t>(y) * w_ + x) * 3];
    p[0] = r;
    p[1] = g;
    p[2] = b;
  }
  void line(int x0, int y0, int x1, int y1, uint8_t r, uint8_t g, uint8_t b, int thick = 1) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      for (int a = 0; a < thick; ++a)
        for (int c = 0; c < thick; ++c) set(x0 + a, y0 + c, r, g, b);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  // Text with its top-left corner at (x, y), 2× scale: 8 px per character, 10 px high.
  void text(int x, int y, const std::string& s, uint8_t shade = 0) {
    for (size_t i = 0; i < s.size(); ++i) {
      const char* gl = glyph(s[i]);
      for (int row = 0; row < 5; ++row)
        for (int col = 0; col < 3; ++col)
          if (gl[row * 3 + col] == 'X')
            for (int a = 0; a < 2; ++a)
              for (int b = 0; b < 2; ++b)
                set(x + static_cast<int>(i) * 8 + col * 2 + a, y + row * 2 + b, shade, shade, shade);
    }
  }
  const std::vector<uint8_t>& rgb() const { return rgb_; }

 private:
  int w_, h_;
  std::vector<uint8_t> rgb_;
};

std::string tick_label(double v) {
  std::string s = fmt::format("{:.3g}", v);
  return s == "-0" ? "0" : s;
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const uint8_t* data, size_t n) {
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; ++i) {
    a = (a + data[i]) % 65521u;
    b = (b + a) % 65521u;
  }
  return (b << 16) | a;
}

std::string encode_png(int width, int height, const std::vector<uint8_t>& rgb) {
  // Raw scanlines: filter byte 0 + RGB row.
  std::string raw;
  raw.reserve(static_cast<size_t>(height) * (1 + 3 * static_cast<size_t>(width)));
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.append(reinterpret_cast<const char*>(&rgb[static_cast<size_t>(y) * width * 3]), static_cast<size_t>(width) * 3);
  }
  // zlib stream: header (deflate, 32K window, no preset dictionary, fastest), stored blocks.
  std::string z = {0x78, 0x01};
  size_t off = 0;
  do {
    const size_t len = std::min<size_t>(65535, raw.size() - off);
    const bool last = off + len == raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(static_cast<char>(len & 0xFF));
    z.push_back(static_cast<char>(len >> 8));
    z.push_back(static_cast<char>(~len & 0xFF));
    z.push_back(static_cast<char>((~len >> 8) & 0xFF));
    z.append(raw, off, len);
    off += len;
  } while (off < raw.size());
  put_u32(z, adler32(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));

  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_u32(ihdr, static_cast<uint32_t>(width));
  put_u32(ihdr, static_cast<uint32_t>(height));
  ihdr += std::string{8, 2, 0, 0, 0};  // bit depth 8, colour type 2 (RGB), deflate, filter 0, no interlace
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", z);
  put_chunk(png, "IEND", "");
  return png;
}

std::string plot_curves(const std::vector<CurveSeries>& series, int width, int height) {
  Canvas cv(width, height);
  const int left = 80, right = width - 20, top = 40, bottom = height - 50;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const CurveSeries& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!(x0 <= x1)) x0 = 0, x1 = 1;
  if (!(y0 <= y1)) y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad;
  y1 += pad;
  auto px = [&](double x) { return left + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (right - left))); };
  auto py = [&](double y) { return bottom - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (bottom - top))); };

  // Grid, axes, ticks and labels.
  for (int t = 0; t <= 5; ++t) {
    const double yv = y0 + (y1 - y0) * t / 5.0, xv = x0 + (x1 - x0) * t / 5.0;
    const int yy = py(yv), xx = px(xv);
    cv.line(left, yy, right, yy, 230, 230, 230);
    cv.line(xx, top, xx, bottom, 230, 230, 230);
    cv.line(left - 5, yy, left, yy, 0, 0, 0);
    cv.line(xx, bottom, xx, bottom + 5, 0, 0, 0);
    const std::string yl = tick_label(yv);
    const std::string xl = x1 - x0 >= 5 ? fmt::format("{:.0f}", xv) : tick_label(xv);  // steps are integers
    cv.text(left - 8 - 8 * static_cast<int>(yl.size()), yy - 5, yl);
    cv.text(xx - 4 * static_cast<int>(xl.size()), bottom + 10, xl);
  }
  cv.line(left, top, left, bottom, 0, 0, 0, 2);
  cv.line(left, bottom, right, bottom, 0, 0, 0, 2);
  cv.text((left + right) / 2 - 16, bottom + 30, "STEP");
  cv.text(10, 12, "LOSS");

  // Curves and legend.
  int legend_y = top + 8;
  for (const CurveSeries& s : series) {
    bool have_prev = false;
    int prev_x = 0, prev_y = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        have_prev = false;
        continue;
      }
      const int cx = px(s.x[i]), cy = py(s.y[i]);
      if (have_prev) {
        cv.line(prev_x, prev_y, cx, cy, s.r, s.g, s.b, 2);
      } else {
        cv.line(cx, cy, cx, cy, s.r, s.g, s.b, 2);
      }
      prev_x = cx;
      prev_y = cy;
      have_prev = true;
    }
    const int lx = right - 8 * static_cast<int>(s.label.size()) - 40;
    cv.line(lx, legend_y + 5, lx + 24, legend_y + 5, s.r, s.g, s.b, 3);
    cv.text(lx + 32, legend_y, s.label);
    legend_y += 16;
  }
  return encode_png(width, height, cv.rgb());
}

}  // namespace dskc
