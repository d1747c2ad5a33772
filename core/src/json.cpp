#include "duet/internal/json.h"

#include <set>
#include <vector>

#include "duet/internal/files.h"
#include "duet/policy.h"

namespace duet {

namespace {

// Builds the document from SAX events (nlohmann's own builders recurse nowhere either, but its
// callback builder rescans a parent for every child it closes, quadratic in the children),
// counting depth and an estimate of the memory the document takes; the first limit passed stops
// the parse with the reason.
template <class Json>
class Builder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  Builder(Json& root, const JsonLimits& limits, uint64_t budget)
      : root_(root), limits_(limits), budget_(budget) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(number_integer_t v) { return value(v); }
  bool number_unsigned(number_unsigned_t v) { return value(v); }
  bool number_float(number_float_t v, const string_t&) { return value(v); }
  bool string(string_t& v) { return charge(v.size()) && value(std::move(v)); }
  bool binary(binary_t&) { return fail(Status(Code::parse_error, "binary values are not JSON")); }

  bool start_object(std::size_t) { return open(Json::value_t::object); }
  bool start_array(std::size_t) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    if (!charge(k.size() + 64)) return false;  // a map node besides the value
    const int depth = static_cast<int>(stack_.size());
    if (limits_.unique_keys && !keys_.empty() && !keys_.back().insert(k).second)
      return fail(Status(Code::parse_error, "key '" + clip_text(k, 80) + "' given twice"));
    if (limits_.on_key) {
      Status s = limits_.on_key(depth, k);
      if (!s.ok()) return fail(std::move(s));
    }
    slot_ = &(*stack_.back())[k];
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    if (error_.ok())
      error_ = Status(Code::parse_error, std::string("malformed JSON (") + e.what() + ")");
    return false;
  }

  const Status& error() const { return error_; }

 private:
  bool fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
    return false;
  }
  bool charge(uint64_t bytes) {
    used_ += bytes;
    if (used_ <= budget_) return true;
    return fail(Status(Code::parse_error,
                       "a JSON document that takes more than " + format_bytes(budget_) +
                           " of memory once parsed (DUET_IMPORT_MEMORY or the load options' "
                           "memory_budget raise the limit)"));
  }
  // The new value's place: the root, the next element of an array, or the slot of the last key.
  template <class V>
  Json* place(V&& v) {
    if (stack_.empty()) {
      root_ = Json(std::forward<V>(v));
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(Json(std::forward<V>(v)));
      return &top.back();
    }
    *slot_ = Json(std::forward<V>(v));
    return slot_;
  }
  template <class V>
  bool value(V&& v) {
    if (!charge(32)) return false;  // a value, and the room an array grows by
    place(std::forward<V>(v));
    return true;
  }
  bool open(typename Json::value_t kind) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth)
      return fail(Status(Code::parse_error, "JSON nested deeper than " +
                                                std::to_string(limits_.max_depth) + " levels"));
    if (!charge(64)) return false;
    stack_.push_back(place(kind));
    if (limits_.unique_keys) keys_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    if (limits_.unique_keys && !keys_.empty()) keys_.pop_back();
    return true;
  }

  Json& root_;
  const JsonLimits& limits_;
  uint64_t budget_;
  uint64_t used_ = 0;
  std::vector<Json*> stack_;
  std::vector<std::set<string_t>> keys_;
  Json* slot_ = nullptr;
  Status error_;
};

template <class Json>
Result<Json> parse(std::string_view text, const JsonLimits& limits) {
  Json root;
  Builder<Json> b(root, limits, import_memory_budget(limits.memory));
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &b);
  } catch (const std::bad_alloc&) {
    return Status(Code::out_of_memory, "out of memory while parsing JSON");
  } catch (const nlohmann::json::exception& e) {
    return Status(Code::parse_error, std::string("malformed JSON (") + e.what() + ")");
  }
  if (!ok || !b.error().ok())
    return b.error().ok() ? Status(Code::parse_error, "malformed JSON") : b.error();
  return root;
}

template <class Json>
void scalar(const Json& j, size_t room, std::string& out) {
  if (j.is_string()) {
    const std::string& s = j.template get_ref<const std::string&>();
    const bool cut = s.size() > room;
    out += Json(cut ? s.substr(0, room) : s).dump(-1, ' ', false, Json::error_handler_t::replace);
    if (cut) out.insert(out.size() - 1, "...");
    return;
  }
  out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <class Json>
std::string excerpt(const Json& j, size_t max) {
  struct Frame {
    const Json* node;
    typename Json::const_iterator it;
  };
  std::string out;
  std::vector<Frame> stack;
  auto visit = [&](const Json& v) {
    if (v.is_structured()) {
      out += v.is_array() ? '[' : '{';
      stack.push_back({&v, v.cbegin()});
    } else {
      scalar(v, max > out.size() ? max - out.size() : 0, out);
    }
  };
  visit(j);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (out.size() > max) {
      out += "...";
      for (size_t i = stack.size(); i-- > 0;) out += stack[i].node->is_array() ? ']' : '}';
      return out;
    }
    if (f.it == f.node->cend()) {
      out += f.node->is_array() ? ']' : '}';
      stack.pop_back();
      continue;
    }
    const bool first = f.it == f.node->cbegin();
    if (!first) out += ',';
    const auto it = f.it++;
    if (f.node->is_object())
      out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ":";
    visit(*it);  // may grow the stack: `f` is not used after this
  }
  return out;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits) {
  return parse<nlohmann::json>(text, limits);
}

Result<nlohmann::ordered_json> parse_ordered_json(std::string_view text, const JsonLimits& limits) {
  return parse<nlohmann::ordered_json>(text, limits);
}

std::string json_excerpt(const nlohmann::json& j, size_t max) {
  return excerpt(j, max);
}

std::string json_excerpt(const nlohmann::ordered_json& j, size_t max) {
  return excerpt(j, max);
}

}  // namespace duet
