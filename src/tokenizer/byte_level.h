// GPT-2's reversible byte <-> unicode table: byte-level BPE vocabularies store
// pieces over 256 printable code points instead of raw bytes (' ' -> 'Ġ' U+0120,
// '\n' -> 'Ċ' U+010A). Printable Latin-1 bytes map to themselves; the other 68
// bytes map to U+0100.. in byte order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace skipkv::byte_level {

// The code point byte `b` is stored as.
uint32_t ByteToCodepoint(uint8_t b);
// UTF-8 encoding of ByteToCodepoint(b) (1 or 2 bytes).
const std::string& ByteToUtf8(uint8_t b);
// Appends the mapped form of every byte of `bytes`.
void Encode(std::string_view bytes, std::string* out);
// Maps a stored piece back to raw bytes. Returns false if a code point is not
// in the table (the piece is then not byte-level text, e.g. an added token).
bool Decode(std::string_view piece, std::string* out);

}  // namespace skipkv::byte_level
