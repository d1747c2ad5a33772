// Byte-level BPE: the pre-tokenizer's pieces, each piece's bytes as GPT-2's characters (one
// symbol per byte), merged pair by pair, the pair of lowest rank (then the leftmost) first, as
// Hugging Face's tokenizers do. Llama 3's tokenizer first looks the whole piece up
// (ignore_merges).
#include <queue>
#include <unordered_map>

#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace duet::llm {
namespace {

struct Sym {
  int32_t id;
  int32_t prev, next;
};

struct Candidate {
  int32_t rank, left, left_id, right_id;
  bool operator>(const Candidate& o) const {
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

}  // namespace

Status Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<std::pair<size_t, size_t>> pieces;
  thread_local std::vector<Sym> sym;
  thread_local std::string mapped;
  pieces.clear();
  pretokenize(pre, text, pieces);
  // A piece seen before has the same tokens: ids[at, at + n) of `out`.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;
  seen.reserve(kSeenMax);
  for (const auto& [at, len] : pieces) {
    const std::string_view piece = text.substr(at, len);
    if (auto it = seen.find(piece); it != seen.end()) {
      for (size_t i = 0; i < it->second.second; ++i) {
        const int32_t id = out[it->second.first + i];
        out.push_back(id);
      }
      continue;
    }
    const size_t first = out.size();
    if (ignore_merges) {
      mapped.clear();
      for (char c : piece) unicode::append(mapped, byte_to_char[static_cast<unsigned char>(c)]);
      if (auto it = ids.find(mapped); it != ids.end()) {
        out.push_back(it->second);
        seen.emplace(piece, std::make_pair(first, size_t{1}));
        continue;
      }
    }
    sym.clear();
    for (size_t i = 0; i < piece.size(); ++i) {
      const unsigned char b = static_cast<unsigned char>(piece[i]);
      const int32_t id = byte_char_token[b];
      if (id < 0) {
        if (unk < 0)
          return Status(Code::invalid_argument,
                        "tokenize: byte " + std::to_string(b) +
                            " has no token in this byte-level vocabulary, and it has no unknown "
                            "token");
      }
      const int32_t k = static_cast<int32_t>(sym.size());
      sym.push_back(
          {id < 0 ? unk : id, k - 1, k + 1 < static_cast<int32_t>(piece.size()) ? k + 1 : -1});
    }
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> agenda;
    auto consider = [&](int32_t l) {
      if (l < 0) return;
      const int32_t r = sym[static_cast<size_t>(l)].next;
      if (r < 0) return;
      const int32_t a = sym[static_cast<size_t>(l)].id, b = sym[static_cast<size_t>(r)].id;
      auto m = merges.find(static_cast<uint64_t>(a) << 32 | static_cast<uint32_t>(b));
      if (m != merges.end()) agenda.push({m->second.rank, l, a, b});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
    while (!agenda.empty()) {
      const Candidate c = agenda.top();
      agenda.pop();
      Sym& l = sym[static_cast<size_t>(c.left)];
      // Stale: the left symbol was merged into its neighbour, or either side changed.
      if (l.id != c.left_id || l.next < 0 || sym[static_cast<size_t>(l.next)].id != c.right_id)
        continue;
      Sym& r = sym[static_cast<size_t>(l.next)];
      l.id = merges.at(static_cast<uint64_t>(c.left_id) << 32 | static_cast<uint32_t>(c.right_id))
                 .result;
      l.next = r.next;
      r.id = -1;
      if (l.next >= 0) sym[static_cast<size_t>(l.next)].prev = c.left;
      consider(l.prev);
      consider(c.left);
    }
    for (int32_t i = 0; i >= 0 && !sym.empty(); i = sym[static_cast<size_t>(i)].next)
      out.push_back(sym[static_cast<size_t>(i)].id);
    if (len <= 64 && seen.size() < kSeenMax)
      seen.emplace(piece, std::make_pair(first, out.size() - first));
  }
  return {};
}

}  // namespace duet::llm
