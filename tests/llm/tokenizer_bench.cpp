// Tokenizer throughput on one core: MB of text per second for each fixture vocabulary, encoding
// and decoding about 8 MB of mixed text (made-up words in Latin, accented Latin, Cyrillic and CJK
// letters, numbers, prose and code, emoji).
//
//   build/tests/llm/duet_tokenizer_bench [MB]
//
// Times are the thread's CPU time. The fixture vocabularies are tiny (420 to 620 tokens), so
// tokens are short (about one byte each) and every word takes many merges: a worst case beside a
// real vocabulary's 32,000 to 150,000 tokens (about four bytes each).
#include <time.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "duet/gguf.h"
#include "duet/tokenizer.h"

// The thread's CPU time: a shared machine's other work does not count against the tokenizer.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 8.0;
  const std::string unit =
      "The quick brown fox jumps over the lazy dog. It's a dog's life; they'll say we've done "
      "it, I'm sure. Numbers: 1, 12, 123, 1234, 2026, 3.14159.\n"
      "def main(args):\n    for i in range(10):\n        print(i * 2)  # twice\n"
      "Naïve café owners in Zürich drink crème brûlée. Ελληνικά γράμματα. Русский текст. "
      "日本語のテキストです。 🦙🚀 emoji   and    spaces\t\ttabs\n\n";
  // Zipf-distributed words from a made-up lexicon of 50,000 (letters, some accented, Cyrillic or
  // CJK), with numbers, punctuation, runs of spaces and line breaks, and the fixed text above
  // every 200 words: the variety of real text, which the per-call cache of pieces cannot hide.
  std::mt19937 rng(1);
  const std::vector<std::string> alphabets[] = {
      {"a", "b", "c", "d", "e", "f", "g", "h", "i", "k", "l",
       "m", "n", "o", "p", "r", "s", "t", "u", "w", "y"},
      {"a", "e", "é", "è", "ü", "ö", "ß", "n", "r", "t", "l", "ç"},
      {"а", "б", "в", "г", "д", "е", "ж", "к", "л", "м", "н", "о", "р", "с", "т"},
      {"日", "本", "語", "の", "テ", "キ", "ス", "ト", "で", "す"}};
  std::vector<std::string> lexicon;
  for (int i = 0; i < 50000; ++i) {
    const auto& a = alphabets[i % 10 < 7 ? 0 : i % 10 == 7 ? 1 : i % 10 == 8 ? 2 : 3];
    std::string w;
    for (int n = 2 + static_cast<int>(rng() % 9); n > 0; --n) w += a[rng() % a.size()];
    if (i % 13 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    lexicon.push_back(w);
  }
  std::vector<double> weight(lexicon.size());
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 1.0 / static_cast<double>(i + 1);
  std::discrete_distribution<size_t> zipf(weight.begin(), weight.end());
  const char* seps[] = {" ", " ", " ", " ", " ", ", ", ". ", "\n", "  ", "\t", "; ", "!\n\n"};
  std::string text;
  for (size_t words = 0; text.size() < mb * 1e6; ++words) {
    text += lexicon[zipf(rng)];
    text += seps[rng() % 12];
    if (words % 17 == 0) text += std::to_string(rng() % 100000) + " ";
    if (words % 200 == 0) text += unit;
  }
  for (const char* file : {"spm.gguf", "bpe_llama3.gguf", "bpe_qwen2.gguf", "bpe_gpt2.gguf"}) {
    auto f = duet::read_gguf(std::string(DUET_TEST_DATA) + "/" + file);
    if (!f.ok()) return std::fprintf(stderr, "%s\n", f.status().message().c_str()), 1;
    auto t = duet::llm::Tokenizer::from_gguf(*f);
    if (!t.ok()) return std::fprintf(stderr, "%s\n", t.status().message().c_str()), 1;
    const double t0 = cpu_seconds();
    auto ids = t->encode(text);
    const double enc = cpu_seconds() - t0;
    if (!ids.ok()) return std::fprintf(stderr, "%s\n", ids.status().message().c_str()), 1;
    const double t1 = cpu_seconds();
    const std::string back = t->decode(*ids);
    const double dec = cpu_seconds() - t1;
    std::printf("%-16s %zu tokens, %5.1f bytes/token: encode %6.1f MB/s, decode %6.1f MB/s\n", file,
                ids->size(), static_cast<double>(text.size()) / static_cast<double>(ids->size()),
                static_cast<double>(text.size()) / enc / 1e6,
                static_cast<double>(back.size()) / dec / 1e6);
  }
  return 0;
}
