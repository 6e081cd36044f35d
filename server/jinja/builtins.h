// The renderer's builtins (filters, tests, the str, dict and list methods
// the sandbox allows, the globals) as tables of small functions looked up
// by name, one file per family, each function as Jinja 3.1 and Python 3
// define it; and the argument handling they share. A name missing from its
// table is an error the caller words ("No filter named ..."). Internal to
// //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_BUILTINS_H_
#define SEQBOAT_SERVER_JINJA_BUILTINS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/jinja/renderer.h"
#include "server/jinja/text.h"
#include "server/jinja/value.h"

namespace seqboat::jinja {

// One call of a builtin: the name the template called it by (aliases share
// a function, and errors name what the template wrote), what it applies to
// (a filter's or a test's subject, a method's receiver; undefined for a
// global) and its arguments.
struct BuiltinCall {
  const std::string& name;
  Value self;
  Args args;
  Kwargs kwargs;
};

// Filters, methods and globals give a value; tests a truth.
using BuiltinFn = absl::StatusOr<Value> (*)(Renderer& r, BuiltinCall call);
using TestFn = absl::StatusOr<bool> (*)(Renderer& r, BuiltinCall call);

template <typename Fn>
struct Builtin {
  std::string_view name;
  Fn fn;
};

template <typename Fn>
Fn FindIn(absl::Span<const Builtin<Fn>> table, std::string_view name) {
  for (const Builtin<Fn>& b : table) {
    if (b.name == name) return b.fn;
  }
  return nullptr;
}

// The tables, each in the file named for its family.
absl::Span<const Builtin<BuiltinFn>> TextFilters();      // text_filters.cc
absl::Span<const Builtin<BuiltinFn>> SequenceFilters();  // sequence_filters.cc
absl::Span<const Builtin<BuiltinFn>> NumberFilters();    // number_filters.cc
absl::Span<const Builtin<TestFn>> Tests();               // is_tests.cc
absl::Span<const Builtin<BuiltinFn>> StrMethods();       // string_methods.cc
absl::Span<const Builtin<BuiltinFn>> DictMethods();      // container_methods.cc
// A list's or a tuple's.
absl::Span<const Builtin<BuiltinFn>> SequenceMethods();
// A for loop's `loop` object's.
absl::Span<const Builtin<BuiltinFn>> LoopMethods();
absl::Span<const Builtin<BuiltinFn>> Globals();  // globals.cc

// A filter of any family, or null.
BuiltinFn FindFilter(std::string_view name);

// --- what the builtins share (builtins.cc)

// BindArgs over a filter's subject and then its arguments, named by the
// filter.
absl::StatusOr<std::vector<Value>> BindFilter(BuiltinCall& call,
                                              const std::vector<Param>& params);
// BindArgs of a call's arguments, named `function` in errors.
absl::StatusOr<std::vector<Value>> BindCall(BuiltinCall& call,
                                            const std::string& function,
                                            const std::vector<Param>& params);
// "str.split", "dict.get": a method as Python's errors name it.
std::string MethodName(const BuiltinCall& call);

absl::StatusOr<int64_t> IntArg(const Value& v, const char* what);
// Neither undefined nor None: an optional argument given.
bool IsPresent(const Value& v);
// The text of `v` as Jinja's soft_str gives it to string filters.
Str StrOf(const Value& v);
// A result computed from `from`: untrusted as a whole when any of it was.
Str Derived(std::string text, std::initializer_list<const Value*> from);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_BUILTINS_H_
