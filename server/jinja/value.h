// The values a template computes with, and Python's rules for them: None,
// bool, int, float, str, list, tuple, dict (insertion-ordered), Jinja's
// namespace and Undefined, and callables (global functions, bound methods,
// macros). Equality, ordering, truth, str() and repr() and json.dumps()
// follow Python, as Jinja inherits them; ints are 64-bit (overflow is an
// error, not a bignum).
//
// Containers are immutable and shared; only a namespace's attributes change
// (`{% set ns.x = ... %}`), and a namespace never holds one, so values have
// no cycles. Lists and dicts nest at most kMaxValueDepth levels.
#ifndef SEQBOAT_SERVER_JINJA_VALUE_H_
#define SEQBOAT_SERVER_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "server/jinja/text.h"

namespace seqboat::jinja {

inline constexpr int kMaxValueDepth = 64;

class Value;
struct ListData;
struct DictData;
struct NamespaceData;
struct CallableData;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable,
  };

  Value() = default;  // Undefined
  // An undefined value; `hint` says why ("'x' is undefined"), for the error
  // that using it raises.
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(Str s);
  static Value String(std::string s);  // trusted text
  static absl::StatusOr<Value> List(std::vector<Value> items);
  static absl::StatusOr<Value> Tuple(std::vector<Value> items);
  // Later items replace earlier ones of an equal key, in its place.
  static absl::StatusOr<Value> Dict(std::vector<std::pair<Value, Value>> items);
  static Value Namespace(std::shared_ptr<NamespaceData> ns);
  static Value Callable(std::shared_ptr<const CallableData> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt; }  // not bool
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  // An int or a bool (Python's bool is an int).
  bool is_integral() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt;
  }
  bool is_sequence() const {
    return kind_ == Kind::kList || kind_ == Kind::kTuple;
  }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool bool_value() const { return std::get<bool>(data_); }
  // An int or a bool's value.
  int64_t int_value() const;
  // Any number's value as a double.
  double number() const;
  const Str& str() const {
    return *std::get<std::shared_ptr<const Str>>(data_);
  }
  const std::string& text() const { return str().text; }
  const std::vector<Value>& items() const;  // list or tuple
  const DictData& dict() const {
    return *std::get<std::shared_ptr<const DictData>>(data_);
  }
  NamespaceData& ns() const {
    return *std::get<std::shared_ptr<NamespaceData>>(data_);
  }
  const CallableData& callable() const {
    return *std::get<std::shared_ptr<const CallableData>>(data_);
  }
  const std::string& undefined_hint() const;
  // Same object (Python's `is`) for containers, namespaces and callables;
  // equal value for the rest.
  bool SameAs(const Value& other) const;

  // 0 for scalars; 1 + the deepest item for containers.
  int depth() const;
  // Python's type name: "str", "int", "list", "dict", "NoneType"...
  std::string TypeName() const;
  bool Truthy() const;

 private:
  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double,
               std::shared_ptr<const Str>, std::shared_ptr<const ListData>,
               std::shared_ptr<const DictData>, std::shared_ptr<NamespaceData>,
               std::shared_ptr<const CallableData>,
               std::shared_ptr<const std::string>>
      data_;
};

struct ListData {
  std::vector<Value> items;
  int depth = 1;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
  // The value of a key equal to `key`, or null.
  const Value* Find(const Value& key) const;
};

// Jinja's namespace() object, and the `loop` variable of a for loop (read
// only).
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
  bool loop = false;
  const Value* Find(const std::string& name) const;
  void Set(const std::string& name, Value value);
};

struct CallableData {
  enum class Type { kGlobal, kMethod, kMacro };
  Type type = Type::kGlobal;
  std::string name;             // the function's, the method's or the macro's
  Value receiver;               // kMethod: the object the method is bound to
  const void* macro = nullptr;  // kMacro: its definition in the template
  std::weak_ptr<void> scope;    // kMacro: the scope it was defined in
};

// Python's ==.
bool Equal(const Value& a, const Value& b);
// Python's a < b; an error for types that do not order ("'<' not supported
// between instances of 'int' and 'str'", with `op` for '<').
absl::StatusOr<bool> Less(const Value& a, const Value& b, const char* op = "<");
// Python's str(): strings as they are, Undefined as "", others as repr().
// Untrusted as a whole when any string inside it is.
Str ToStr(const Value& v);
// Python's repr().
std::string ReprOf(const Value& v);
bool AnyUntrusted(const Value& v);
// Whether a namespace (or a loop object) is reachable from `v`.
bool ContainsNamespace(const Value& v);

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps' indent, as a string
  // json.dumps' default is "," when there is an indent.
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// Python's json.dumps(v, ...) with transformers' defaults (non-ASCII as is).
absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_VALUE_H_
