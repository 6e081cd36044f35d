// What the builtin families share, and the renderer's calls into their
// tables.
#include "server/jinja/builtins.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat::jinja {
namespace {

// Jinja filters this renderer leaves out.
constexpr std::string_view kUnsupportedFilters[] = {
    "batch",     "filesizeformat", "groupby", "pprint",   "random", "slice",
    "striptags", "urlencode",      "urlize",  "wordwrap", "xmlattr"};

}  // namespace

absl::StatusOr<std::vector<Value>> BindArgs(const std::string& function,
                                            Args args, Kwargs kwargs,
                                            const std::vector<Param>& params) {
  if (args.size() > params.size()) {
    return Invalid(absl::StrCat(function, "() takes at most ", params.size(),
                                " arguments (", args.size(), " given)"));
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.size(); ++i) bound[i] = std::move(args[i]);
  for (auto& [key, value] : kwargs) {
    size_t i = 0;
    while (i < params.size() && key != params[i].name) ++i;
    if (i == params.size()) {
      return Invalid(absl::StrCat(
          function, "() got an unexpected keyword argument '", key, "'"));
    }
    if (bound[i].has_value()) {
      return Invalid(
          absl::StrCat(function, "() got multiple values for '", key, "'"));
    }
    bound[i] = std::move(value);
  }
  std::vector<Value> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i].has_value()) {
      out.push_back(*std::move(bound[i]));
    } else if (params[i].default_value.has_value()) {
      out.push_back(*params[i].default_value);
    } else {
      return Invalid(absl::StrCat(function, "() missing required argument '",
                                  params[i].name, "'"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<Value>> BindFilter(
    BuiltinCall& call, const std::vector<Param>& params) {
  call.args.insert(call.args.begin(), call.self);
  return BindCall(call, call.name, params);
}

absl::StatusOr<std::vector<Value>> BindCall(BuiltinCall& call,
                                            const std::string& function,
                                            const std::vector<Param>& params) {
  return BindArgs(function, std::move(call.args), std::move(call.kwargs),
                  params);
}

std::string MethodName(const BuiltinCall& call) {
  return absl::StrCat(call.self.TypeName(), ".", call.name);
}

absl::StatusOr<int64_t> IntArg(const Value& v, const char* what) {
  if (v.is_integral()) return v.int_value();
  return Invalid(absl::StrCat(what, " must be an integer, got ", v.TypeName()));
}

bool IsPresent(const Value& v) { return !v.is_undefined() && !v.is_none(); }

Str StrOf(const Value& v) { return ToStr(v); }

Str Derived(std::string text, std::initializer_list<const Value*> from) {
  bool untrusted = false;
  for (const Value* v : from) untrusted = untrusted || AnyUntrusted(*v);
  return WithTaint(std::move(text), untrusted);
}

BuiltinFn FindFilter(std::string_view name) {
  for (absl::Span<const Builtin<BuiltinFn>> family :
       {TextFilters(), SequenceFilters(), NumberFilters()}) {
    if (BuiltinFn fn = FindIn(family, name)) return fn;
  }
  return nullptr;
}

bool Renderer::HasFilter(const std::string& name) {
  return FindFilter(name) != nullptr;
}

bool Renderer::HasTest(const std::string& name) {
  return FindIn(Tests(), name) != nullptr;
}

absl::StatusOr<Value> Renderer::Filter(const std::string& name, Value subject,
                                       Args args, Kwargs kwargs) {
  if (BuiltinFn fn = FindFilter(name)) {
    return fn(*this,
              {name, std::move(subject), std::move(args), std::move(kwargs)});
  }
  for (std::string_view unsupported : kUnsupportedFilters) {
    if (name == unsupported) {
      return Invalid(absl::StrCat("the filter '", name,
                                  "' is not supported in chat templates"));
    }
  }
  return Invalid(absl::StrCat("No filter named '", name, "'."));
}

absl::StatusOr<bool> Renderer::Test(const std::string& name,
                                    const Value& subject, Args args,
                                    Kwargs kwargs) {
  if (TestFn fn = FindIn(Tests(), name)) {
    return fn(*this, {name, subject, std::move(args), std::move(kwargs)});
  }
  return Invalid(absl::StrCat("No test named '", name, "'."));
}

absl::StatusOr<Value> Renderer::CallGlobal(const std::string& name, Args args,
                                           Kwargs kwargs) {
  if (BuiltinFn fn = FindIn(Globals(), name)) {
    return fn(*this, {name, Value(), std::move(args), std::move(kwargs)});
  }
  return Invalid(absl::StrCat("the function '", name,
                              "' is not supported in chat templates"));
}

absl::StatusOr<Value> Renderer::CallMethod(const Value& self,
                                           const std::string& name, Args args,
                                           Kwargs kwargs) {
  absl::Span<const Builtin<BuiltinFn>> methods;
  if (self.is_string()) {
    methods = StrMethods();
  } else if (self.is_dict()) {
    methods = DictMethods();
  } else if (self.is_sequence()) {
    methods = SequenceMethods();
  } else if (self.is_namespace() && self.ns().loop) {
    methods = LoopMethods();
  }
  if (BuiltinFn fn = FindIn(methods, name)) {
    return fn(*this, {name, self, std::move(args), std::move(kwargs)});
  }
  return Invalid(absl::StrCat(self.TypeName(), ".", name,
                              "() is not supported in chat templates"));
}

}  // namespace seqboat::jinja
