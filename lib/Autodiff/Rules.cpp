//===- Rules.cpp - Loading derivatives.yaml files -----------------------------===//
//
// Reads rule files with yaml-cpp. Every entry is checked at load time against
// the op registry: the op exists, each key is a tensor input of its schema, each
// formula parses and only names things that exist. Errors carry the file, line
// and column (yaml-cpp Marks are 0-based; diagnostics are 1-based).
//===----------------------------------------------------------------------===//
#include "AutodiffInternal.h"

#include <cerrno>
#include <cstring>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace aotc {

static SourceLoc markLoc(const std::string &file, const YAML::Mark &m) {
  SourceLoc l;
  l.file = file;
  if (m.line >= 0) {
    l.line = m.line + 1;
    l.col = m.column + 1;
  }
  return l;
}

/// Maps each character offset of a scalar's value to its line:col in the file.
/// Non-blank characters of the value appear in the same order in the source
/// (plain, quoted without escapes, folded and literal scalars), so they are
/// matched one by one; blanks take the position of the next matched character.
static std::function<SourceLoc(size_t)> offsetMap(const std::string &text, const std::string &file,
                                                  const YAML::Node &v) {
  const std::string &val = v.Scalar();
  SourceLoc base = markLoc(file, v.Mark());
  std::vector<SourceLoc> locs(val.size() + 1, base);
  long long pos = v.Mark().pos;
  if (pos >= 0 && (size_t)pos <= text.size()) {
    size_t sp = (size_t)pos;
    int line = base.line, col = base.col;
    // Skip an opening quote or a block indicator line.
    auto advance = [&]() {
      if (text[sp] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
      ++sp;
    };
    if (sp < text.size() && (text[sp] == '"' || text[sp] == '\'')) advance();
    else if (sp < text.size() && (text[sp] == '>' || text[sp] == '|'))
      while (sp < text.size() && text[sp] != '\n') advance();
    bool ok = true;
    std::vector<size_t> pendingBlank;
    for (size_t i = 0; i < val.size(); ++i) {
      if (std::isspace((unsigned char)val[i])) {
        pendingBlank.push_back(i);
        continue;
      }
      while (ok && sp < text.size() && std::isspace((unsigned char)text[sp])) advance();
      if (!ok || sp >= text.size() || text[sp] != val[i]) {
        ok = false; // escapes or something unexpected: keep the scalar's start
        break;
      }
      SourceLoc l = base;
      l.line = line;
      l.col = col;
      for (size_t b : pendingBlank) locs[b] = l;
      pendingBlank.clear();
      locs[i] = l;
      advance();
    }
    if (ok) {
      SourceLoc l = base;
      l.line = line;
      l.col = col;
      for (size_t b : pendingBlank) locs[b] = l;
      locs[val.size()] = l;
    }
  }
  return [locs](size_t p) { return locs[std::min(p, locs.size() - 1)]; };
}

void DerivativeRules::loadFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) userError("cannot open derivatives file '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  loadString(ss.str(), path);
}

void DerivativeRules::loadString(const std::string &text, const std::string &filename) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception &ex) {
    userError(markLoc(filename, ex.mark), "invalid YAML in derivatives file: " + ex.msg);
  }
  if (!root || root.IsNull()) return; // an empty file adds nothing
  if (!root.IsSequence())
    userError(markLoc(filename, root.Mark()),
              "a derivatives file is a YAML list of entries ('- name: aten.<op>.<overload>')");
  std::set<std::string> seenHere;
  for (const YAML::Node &entry : root) {
    SourceLoc eloc = markLoc(filename, entry.Mark());
    if (!entry.IsMap()) userError(eloc, "each derivatives entry must be a mapping with a 'name' key");
    YAML::Node nameNode;
    bool hasName = false;
    for (auto it = entry.begin(); it != entry.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == "name") {
        // Checked before assigning: yaml-cpp's Node::operator= between two valid nodes
        // rewrites the first node in the document instead of rebinding.
        if (hasName) userError(markLoc(filename, it->first.Mark()), "'name' given twice in one entry");
        nameNode = it->second;
        hasName = true;
      }
    if (!hasName) userError(eloc, "derivatives entry without 'name'");
    SourceLoc nloc = markLoc(filename, nameNode.Mark());
    if (!nameNode.IsScalar()) userError(nloc, "'name' must be an op target such as aten.mul.Tensor");
    std::string raw = nameNode.Scalar();
    std::string t = raw;
    if (t.rfind("torch.ops.", 0) == 0) t = t.substr(10);
    if (t.rfind("aten.", 0) != 0 && t.rfind("aten::", 0) != 0 && t.rfind("aotc.", 0) != 0 && t.rfind("aotc::", 0) != 0)
      t = "aten." + t; // aotc's own ops (aotc.safe_softmax) keep their namespace
    t = canonicalTarget(t);
    const OpDef *op = OpRegistry::get().lookup(t);
    if (!op) userError(nloc, "derivative rule for unknown op '" + raw + "'");
    t = op->target();
    if (!seenHere.insert(t).second) userError(nloc, "second derivative rule for " + t + " in this file");

    DerivativeRule rule;
    rule.target = t;
    rule.loc = nloc;
    // Parses a scalar formula, locating each character in the file.
    auto parseAt = [&](const YAML::Node &v) { return parseFormula(v.Scalar(), offsetMap(text, filename, v)); };
    std::set<std::string> letNames;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar() != "let") continue;
      SourceLoc lloc = markLoc(filename, it->second.Mark());
      if (!it->second.IsMap()) userError(lloc, "'let' must map names to formulas");
      for (auto lt = it->second.begin(); lt != it->second.end(); ++lt) {
        SourceLoc kloc = markLoc(filename, lt->first.Mark());
        std::string ln = lt->first.IsScalar() ? lt->first.Scalar() : "";
        bool ident = !ln.empty() && (std::isalpha((unsigned char)ln[0]) || ln[0] == '_') &&
                     std::all_of(ln.begin(), ln.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
        if (!ident) userError(kloc, "a 'let' name must be an identifier");
        bool reserved = ln == "grad" || ln == "grads" || ln.rfind("result", 0) == 0 || ln == "True" ||
                        ln == "False" || ln == "None" || letNames.count(ln);
        for (auto &a : op->schema.args) reserved |= a.name == ln;
        if (reserved) userError(kloc, "'let' name '" + ln + "' is already taken");
        if (!lt->second.IsScalar() || lt->second.Scalar().empty())
          userError(markLoc(filename, lt->second.Mark()), "'let' values must be formulas");
        FormulaExpr e = parseAt(lt->second);
        autodiff::validateFormula(e, *op, letNames); // only earlier names: no cycles
        letNames.insert(ln);
        rule.lets.emplace_back(ln, std::move(e));
      }
    }
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      SourceLoc kloc = markLoc(filename, it->first.Mark());
      if (!it->first.IsScalar()) userError(kloc, "keys of a derivatives entry must be input names");
      std::string key = it->first.Scalar();
      if (key == "name" || key == "let") continue;
      const SchemaArg *sa = nullptr;
      for (auto &a : op->schema.args)
        if (a.name == key) sa = &a;
      if (!sa) {
        std::string names;
        for (auto &a : op->schema.args)
          if (a.isTensor()) names += (names.empty() ? "" : ", ") + a.name;
        userError(kloc, t + " has no input '" + key + "' (tensor inputs: " + names + ")");
      }
      if (!sa->isTensor())
        userError(kloc, "input '" + key + "' of " + t + " is a " + sa->type +
                            ", not a tensor; only tensor inputs have derivatives");
      if (rule.formulas.count(key) || rule.nonDifferentiable.count(key))
        userError(kloc, "input '" + key + "' given twice");
      // A copy, not a reference: yaml-cpp's iterator returns a temporary proxy whose
      // `second` dies at the end of this statement (ASan: stack-use-after-scope).
      const YAML::Node v = it->second;
      SourceLoc vloc = markLoc(filename, v.Mark());
      if (!v.IsScalar() || v.Scalar().empty())
        userError(vloc, "the derivative of '" + key + "' must be a formula or non_differentiable");
      std::string f = v.Scalar();
      if (f == "non_differentiable") {
        rule.nonDifferentiable.insert(key);
        continue;
      }
      FormulaExpr e = parseAt(v);
      autodiff::validateFormula(e, *op, letNames);
      rule.formulas.emplace(key, std::move(e));
    }
    rules_[t] = std::move(rule);
  }
}

const DerivativeRule *DerivativeRules::find(const std::string &target) const {
  auto it = rules_.find(target);
  return it == rules_.end() ? nullptr : &it->second;
}

static std::string exeDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.parent_path().string();
}

std::string builtinDerivativesPath() {
  std::vector<std::string> cands;
  if (const char *env = std::getenv("AOTC_DERIVATIVES_YAML"); env && *env) return env;
#ifdef AOTC_DERIVATIVES_YAML
  cands.push_back(AOTC_DERIVATIVES_YAML);
#endif
  std::string d = exeDir();
  if (!d.empty()) {
    cands.push_back(d + "/derivatives.yaml");
    cands.push_back(d + "/../share/aotc/derivatives.yaml");
  }
  for (auto &c : cands)
    if (std::filesystem::exists(c)) return c;
  std::string list;
  for (auto &c : cands) list += "\n  " + c;
  userError("cannot find the built-in derivatives.yaml; looked in:" + list +
            "\n(set AOTC_DERIVATIVES_YAML to its path)");
}

const DerivativeRules &DerivativeRules::builtin() {
  static std::once_flag once;
  static DerivativeRules rules;
  static std::string error;
  static bool userErr = false;
  std::call_once(once, [] {
    try {
      rules.loadFile(builtinDerivativesPath());
    } catch (const Error &e) {
      error = e.what();
      userErr = e.kind() == Error::Kind::User;
    }
  });
  if (!error.empty()) throw Error(userErr ? Error::Kind::User : Error::Kind::Internal, error);
  return rules;
}

DerivativeRules loadDerivativeRules(const JointOptions &opts) {
  DerivativeRules r = DerivativeRules::builtin();
  for (auto &f : opts.extraDerivatives) r.loadFile(f);
  return r;
}

} // namespace aotc
