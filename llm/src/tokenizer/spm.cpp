// SentencePiece BPE as sentencepiece's bpe_model encodes: characters are the first symbols; the
// adjacent pair whose concatenation is a piece of the best score merges first (the leftmost on a
// tie), until no pair is a piece; a merged piece of type "unused" is split back into the pieces
// it was made of; a symbol that is not a piece becomes its bytes' <0xXX> tokens, else the
// unknown token.
#include <queue>
#include <unordered_map>

#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace duet::llm {
namespace {

const char kSpace[] = "\xE2\x96\x81";  // U+2581

struct Symbol {
  size_t at, len;
  int64_t prev, next;
};

struct Pair {
  float score;
  int64_t left;
  size_t len;
  bool operator<(const Pair& o) const {  // the priority queue's top is the largest
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

Status Tokenizer::Impl::encode_spm(std::string_view raw, std::vector<int32_t>& out) const {
  // Spaces are U+2581; a space goes before the text when the file says so (the caller decides).
  std::string s;
  s.reserve(raw.size() + raw.size() / 4 + 3);
  for (char c : raw) {
    if (c == ' ')
      s += kSpace;
    else
      s += c;
  }
  if (!spm_split) return encode_spm_segment(s, out);
  // No piece joins a character to a U+2581 after it, so no merge crosses the start of a run of
  // U+2581 that follows another character: the text splits there into parts that merge alone,
  // and a part seen before has the same tokens (ids[at, at + n) of `out`).
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;
  seen.reserve(kSeenMax);
  const std::string_view text(s);
  size_t start = 0;
  auto part = [&](size_t end) -> Status {
    const std::string_view w = text.substr(start, end - start);
    start = end;
    if (auto it = seen.find(w); it != seen.end()) {
      for (size_t i = 0; i < it->second.second; ++i) {
        const int32_t id = out[it->second.first + i];
        out.push_back(id);
      }
      return {};
    }
    const size_t at = out.size();
    DUET_TRY(encode_spm_segment(w, out));
    if (w.size() <= 64 && seen.size() < kSeenMax)
      seen.emplace(w, std::make_pair(at, out.size() - at));
    return {};
  };
  for (size_t i = 1; i + 3 <= text.size(); ++i)
    if (text.compare(i, 3, kSpace) == 0 && (i < 3 || text.compare(i - 3, 3, kSpace) != 0)) {
      DUET_TRY(part(i));
      i += 2;
    }
  return part(text.size());
}

Status Tokenizer::Impl::encode_spm_segment(std::string_view s, std::vector<int32_t>& out) const {
  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = static_cast<size_t>(unicode::sequence_length(static_cast<unsigned char>(s[i])));
    if (len == 0 || i + len > s.size()) len = 1;
    const int64_t k = static_cast<int64_t>(sym.size());
    sym.push_back({i, len, k - 1, -1});
    if (k > 0) sym[static_cast<size_t>(k - 1)].next = k;
    i += len;
  }
  // The pieces a merge can make: normal, user-defined and unused ones (as sentencepiece's
  // vocabulary of pieces; control, unknown and byte tokens are not among them).
  auto mergeable = [&](std::string_view piece, int32_t& id) {
    auto it = ids.find(piece);
    if (it == ids.end()) return false;
    const TokenType ty = type[static_cast<size_t>(it->second)];
    if (ty != TokenType::normal && ty != TokenType::user_defined && ty != TokenType::unused)
      return false;
    id = it->second;
    return true;
  };
  std::priority_queue<Pair> agenda;
  // The two pieces each unused piece was last found to be made of, to split it back.
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> rev_merge;
  const std::string_view text = s;
  auto add_pair = [&](int64_t l, int64_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = sym[static_cast<size_t>(l)];
    const Symbol& b = sym[static_cast<size_t>(r)];
    int32_t id = 0;
    const std::string_view piece = text.substr(a.at, a.len + b.len);
    if (!mergeable(piece, id)) return;
    agenda.push({score[static_cast<size_t>(id)], l, a.len + b.len});
    if (type[static_cast<size_t>(id)] == TokenType::unused)
      rev_merge[piece] = {text.substr(a.at, a.len), text.substr(b.at, b.len)};
  };
  for (size_t i = 1; i < sym.size(); ++i)
    add_pair(static_cast<int64_t>(i - 1), static_cast<int64_t>(i));
  while (!agenda.empty()) {
    const Pair p = agenda.top();
    agenda.pop();
    Symbol& a = sym[static_cast<size_t>(p.left)];
    if (a.len == 0 || a.next < 0) continue;
    Symbol& b = sym[static_cast<size_t>(a.next)];
    if (a.len + b.len != p.len) continue;  // one of them changed since the pair was found
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (a.next >= 0) sym[static_cast<size_t>(a.next)].prev = p.left;
    add_pair(a.prev, p.left);
    add_pair(p.left, a.next);
  }

  std::string_view missing;
  auto emit = [&](auto&& self, std::string_view piece) -> void {
    auto it = ids.find(piece);
    if (it != ids.end() && type[static_cast<size_t>(it->second)] != TokenType::unused) {
      out.push_back(it->second);
      return;
    }
    if (auto m = rev_merge.find(piece); m != rev_merge.end()) {
      self(self, m->second.first);
      self(self, m->second.second);
      return;
    }
    // Not a piece: its bytes' tokens when the vocabulary has them all, else the unknown token.
    bool bytes = true;
    for (char c : piece) bytes = bytes && byte_token[static_cast<unsigned char>(c)] >= 0;
    if (bytes) {
      for (char c : piece) out.push_back(byte_token[static_cast<unsigned char>(c)]);
    } else if (unk >= 0) {
      out.push_back(unk);
    } else if (missing.empty()) {
      missing = piece;
    }
  };
  for (int64_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& x = sym[static_cast<size_t>(i)];
    emit(emit, text.substr(x.at, x.len));
  }
  if (!missing.empty())
    return Status(Code::invalid_argument,
                  "tokenize: '" + std::string(missing) +
                      "' has no token, no byte tokens and the vocabulary no unknown token");
  return {};
}

}  // namespace duet::llm
