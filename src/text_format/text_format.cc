// The lexical level of the text form: how names, strings and numbers are written (for
// printer.cc) and read (the Cursor, for parser.cc), kept side by side so that what
// one writes the other reads back bit for bit.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "text_format/text_format.h"
#include "text_format/internal.h"

namespace fusionopt::text_detail {
namespace {

bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// Encodes `value` into an IEEE-754 style binary format with the given field widths,
// rounding to nearest even; overflow gives infinity, NaN stays a quiet NaN of the same sign.
uint32_t EncodeBinary(double value, int exponent_bits, int mantissa_bits) {
  const uint32_t sign = std::signbit(value) ? (1u << (exponent_bits + mantissa_bits)) : 0u;
  const uint32_t all_ones = (1u << exponent_bits) - 1;
  const uint32_t infinity = sign | (all_ones << mantissa_bits);
  if (std::isnan(value)) return infinity | (1u << (mantissa_bits - 1));
  if (std::isinf(value)) return infinity;
  const double magnitude = std::fabs(value);
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int min_exponent = 1 - bias;
  int frexp_exponent = 0;
  std::frexp(magnitude, &frexp_exponent);  // magnitude = f * 2^e with f in [0.5, 1)
  int exponent = frexp_exponent - 1;
  if (magnitude == 0 || exponent < min_exponent) {
    // Subnormal: count units of the smallest subnormal; rounding up into the smallest
    // normal yields exactly its encoding.
    double units = std::nearbyint(std::ldexp(magnitude, mantissa_bits - min_exponent));
    return sign | static_cast<uint32_t>(units);
  }
  double units = std::nearbyint(std::ldexp(magnitude, mantissa_bits - exponent));
  if (units == std::ldexp(1.0, mantissa_bits + 1)) {  // rounded up to the next power of two
    units /= 2;
    ++exponent;
  }
  if (exponent > bias) return infinity;
  return sign | (static_cast<uint32_t>(exponent + bias) << mantissa_bits) |
         (static_cast<uint32_t>(units) - (1u << mantissa_bits));
}

double DecodeBinary(uint32_t bits, int exponent_bits, int mantissa_bits) {
  const bool negative = ((bits >> (exponent_bits + mantissa_bits)) & 1u) != 0;
  const uint32_t all_ones = (1u << exponent_bits) - 1;
  const uint32_t exponent = (bits >> mantissa_bits) & all_ones;
  const uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  const int bias = static_cast<int>(all_ones >> 1);
  double magnitude;
  if (exponent == all_ones) {
    magnitude = mantissa != 0 ? NAN : INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - bias - mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + (1u << mantissa_bits)),
                           static_cast<int>(exponent) - bias - mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// A float printed like an integer ("1", "-0") would read back as an int attribute.
std::string MarkAsFloat(std::string text) {
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string SpecialFloat(bool negative, bool is_nan) {
  return std::string(negative ? "-" : "") + (is_nan ? "nan" : "inf");
}

// std::to_chars without a precision gives the shortest text that reads back exactly.
template <typename T>
std::string FormatShortest(T value) {
  if (std::isnan(value) || std::isinf(value)) {
    return SpecialFloat(std::signbit(value), std::isnan(value));
  }
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return MarkAsFloat(std::string(buffer, result.ptr));
}

// Fewest significant digits whose decimal text converts back to the same 16-bit pattern.
std::string FormatShortest16(uint16_t bits, double value, uint16_t (*encode)(double)) {
  if (std::isnan(value) || std::isinf(value)) {
    return SpecialFloat(std::signbit(value), std::isnan(value));
  }
  char buffer[64];
  for (int digits = 1; digits <= 17; ++digits) {
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), value,
                                std::chars_format::general, digits);
    double reread = 0;
    std::from_chars(buffer, result.ptr, reread);
    if (encode(reread) == bits) return MarkAsFloat(std::string(buffer, result.ptr));
  }
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return MarkAsFloat(std::string(buffer, result.ptr));
}

}  // namespace

bool IsNameChar(char c) {
  return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '.' || c == '/' || c == ':' ||
         c == '-';
}

bool IsWordStart(char c) { return IsAsciiAlpha(c) || c == '_'; }
bool IsWordChar(char c) { return IsWordStart(c) || IsAsciiDigit(c) || c == '.'; }

std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escape[8];
          std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned char>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string FormatName(std::string_view name) {
  bool bare = !name.empty();
  for (char c : name) bare = bare && IsNameChar(c);
  return bare ? std::string(name) : Quote(name);
}

std::string FormatWord(std::string_view word) {
  bool bare = !word.empty() && IsWordStart(word.front());
  for (char c : word) bare = bare && IsWordChar(c);
  return bare ? std::string(word) : Quote(word);
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 0xf];
  }
  return out;
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (IsAsciiDigit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int high = nibble(hex[i]), low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
  }
  return out;
}

std::string FormatFloat(float value) { return FormatShortest(value); }
std::string FormatDouble(double value) { return FormatShortest(value); }

uint16_t DoubleToFloat16(double value) { return static_cast<uint16_t>(EncodeBinary(value, 5, 10)); }
uint16_t DoubleToBFloat16(double value) { return static_cast<uint16_t>(EncodeBinary(value, 8, 7)); }
double Float16ToDouble(uint16_t bits) { return DecodeBinary(bits, 5, 10); }
double BFloat16ToDouble(uint16_t bits) { return DecodeBinary(bits, 8, 7); }

std::string FormatFloat16(uint16_t bits) {
  return FormatShortest16(bits, Float16ToDouble(bits), DoubleToFloat16);
}

std::string FormatBFloat16(uint16_t bits) {
  return FormatShortest16(bits, BFloat16ToDouble(bits), DoubleToBFloat16);
}

// ---------------------------------------------------------------- reading

int LineOf(std::string_view text, size_t offset) {
  int line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

Status ErrorAt(std::string_view text, size_t offset, const std::string& message) {
  size_t line_start = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
  return InvalidModel("line " + std::to_string(LineOf(text, offset)) + ", column " +
                      std::to_string(offset - line_start + 1) + ": " + message);
}

char Cursor::Peek() {
  SkipSpace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool Cursor::AtEnd() {
  SkipSpace();
  return pos_ >= text_.size();
}

size_t Cursor::offset() {
  SkipSpace();
  return pos_;
}

bool Cursor::TryConsume(std::string_view token) {
  SkipSpace();
  if (text_.substr(pos_, token.size()) != token) return false;
  pos_ += token.size();
  return true;
}

Status Cursor::Expect(std::string_view token) {
  if (TryConsume(token)) return Status::Ok();
  return Error("expected '" + std::string(token) + "' but found " + DescribeNext());
}

std::string_view Cursor::PeekWord() {
  SkipSpace();
  return PeekWordAt(pos_);
}

bool Cursor::TryKeyword(std::string_view keyword) {
  if (PeekWord() != keyword) return false;
  pos_ += keyword.size();
  return true;
}

Result<std::string> Cursor::Word(std::string_view what) {
  std::string_view word = PeekWord();
  if (word.empty()) return Error("expected " + std::string(what) + " but found " + DescribeNext());
  pos_ += word.size();
  return std::string(word);
}

Result<std::string> Cursor::QuotedString(std::string_view what) {
  if (Peek() != '"') return Error("expected " + std::string(what) + " but found " + DescribeNext());
  return StringHere();
}

Result<std::string> Cursor::WordOrString(std::string_view what) {
  return Peek() == '"' ? StringHere() : Word(what);
}

Result<std::string> Cursor::NameHere(std::string_view what) {
  if (pos_ < text_.size() && text_[pos_] == '"') return StringHere();
  size_t end = pos_;
  while (end < text_.size() && IsNameChar(text_[end])) ++end;
  if (end == pos_) return Error("expected " + std::string(what) + " but found " + DescribeNext());
  std::string name(text_.substr(pos_, end - pos_));
  pos_ = end;
  return name;
}

Result<NumberToken> Cursor::Number(std::string_view what) {
  NumberToken token;
  token.offset = offset();
  size_t end = pos_;
  if (end < text_.size() && text_[end] == '-') ++end;
  auto digits = [&] {
    size_t start = end;
    while (end < text_.size() && IsAsciiDigit(text_[end])) ++end;
    return end - start;
  };
  std::string_view word = PeekWordAt(end);
  if (word == "inf" || word == "nan") {
    token.is_float = true;
    end += word.size();
  } else {
    if (digits() == 0) {
      return Error("expected " + std::string(what) + " but found " + DescribeNext());
    }
    if (end < text_.size() && text_[end] == '.') {
      token.is_float = true;
      ++end;
      digits();
    }
    if (end < text_.size() && (text_[end] == 'e' || text_[end] == 'E')) {
      token.is_float = true;
      ++end;
      if (end < text_.size() && (text_[end] == '-' || text_[end] == '+')) ++end;
      if (digits() == 0) return ErrorAt(token.offset, "malformed number exponent");
    }
  }
  if (end < text_.size() && IsWordChar(text_[end])) {
    return ErrorAt(token.offset, "malformed number '" +
                                     std::string(text_.substr(pos_, end - pos_ + 1)) + "'");
  }
  token.text = std::string(text_.substr(pos_, end - pos_));
  pos_ = end;
  return token;
}

Status Cursor::Error(const std::string& message) { return ErrorAt(offset(), message); }

Status Cursor::ErrorAt(size_t offset, const std::string& message) const {
  return text_detail::ErrorAt(text_, offset, message);
}

std::string Cursor::DescribeNext() {
  if (AtEnd()) return "the end of the text";
  std::string_view word = PeekWord();
  if (!word.empty()) return "'" + std::string(word) + "'";
  return "'" + std::string(1, text_[pos_]) + "'";
}

void Cursor::SkipSpace() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else {
      return;
    }
  }
}

std::string_view Cursor::PeekWordAt(size_t start) const {
  size_t end = start;
  if (end < text_.size() && IsWordStart(text_[end])) {
    while (end < text_.size() && IsWordChar(text_[end])) ++end;
  }
  return text_.substr(start, end - start);
}

Result<std::string> Cursor::StringHere() {
  const size_t start = pos_;
  std::string out;
  for (size_t i = pos_ + 1; i < text_.size() && text_[i] != '\n'; ++i) {
    char c = text_[i];
    if (c == '"') {
      pos_ = i + 1;
      return out;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= text_.size()) break;
    switch (text_[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case '\\': case '"': case '\'': out += text_[i]; break;
      case 'x': {
        auto byte = FromHex(text_.substr(i + 1, std::min<size_t>(2, text_.size() - i - 1)));
        if (!byte || byte->size() != 1) return ErrorAt(i - 1, "'\\x' needs two hex digits");
        out += *byte;
        i += 2;
        break;
      }
      default:
        return ErrorAt(i - 1, "unknown escape '\\" + std::string(1, text_[i]) + "'");
    }
  }
  return ErrorAt(start, "unterminated string");
}

}  // namespace fusionopt::text_detail
