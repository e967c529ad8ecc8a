"""Which calls of an evaluator run code, read from its syntax tree (nothing
of it is imported or run).

Usage: python3 mlrb_code_readers.py get_score|module <eval.py>

Unpickling is executing: pickle.load/loads (and Unpickler, dill, joblib,
pandas.read_pickle, numpy.load with allow_pickle=True, torch.load without
weights_only=True), as are exec/eval/compile, importing a module by name or
path, a dataset's loading script, a model's own code, a program.

* ``get_score``: an MLAgentBench evaluator. Only the calls that get the
  submission folder (get_score's first parameter) or anything computed from
  it are reported, followed into the module's own functions it is passed to:
  reading the task's own data this way is the task's business.
* ``module``: any such call anywhere in the file (an evaluator that says it
  reads its submission as data should make none).

Prints JSON: {"found": [{"line": N, "why": "..."}]}, or {"error": "..."}
(exit status 1) when the file cannot be read or parsed.
"""
import ast
import json
import sys

# Qualified name of the callee -> why calling it runs code.
RUNS_CODE = {
    "pickle.load": "pickle.load() runs what the pickle says",
    "pickle.loads": "pickle.loads() runs what the pickle says",
    "pickle.Unpickler": "pickle.Unpickler runs what the pickle says",
    "_pickle.load": "pickle.load() runs what the pickle says",
    "_pickle.loads": "pickle.loads() runs what the pickle says",
    "cPickle.load": "pickle.load() runs what the pickle says",
    "dill.load": "dill.load() unpickles",
    "dill.loads": "dill.loads() unpickles",
    "cloudpickle.load": "cloudpickle.load() unpickles",
    "cloudpickle.loads": "cloudpickle.loads() unpickles",
    "joblib.load": "joblib.load() unpickles",
    "pandas.read_pickle": "pandas.read_pickle() unpickles",
    "shelve.open": "shelve unpickles",
    "yaml.unsafe_load": "yaml.unsafe_load() builds any Python object",
    "exec": "exec() runs code",
    "eval": "eval() runs code",
    "compile": "compile() makes code to run",
    "__import__": "__import__() runs a module",
    "importlib.import_module": "import_module() runs a module",
    "importlib.util.spec_from_file_location": "it imports a module by path",
    "importlib.machinery.SourceFileLoader": "it imports a module by path",
    "runpy.run_path": "runpy runs a module",
    "runpy.run_module": "runpy runs a module",
    "datasets.load_dataset": "load_dataset() runs a dataset's loading script",
    "subprocess.run": "subprocess starts a program",
    "subprocess.call": "subprocess starts a program",
    "subprocess.check_call": "subprocess starts a program",
    "subprocess.check_output": "subprocess starts a program",
    "subprocess.Popen": "subprocess starts a program",
    "os.system": "os.system() starts a program",
    "os.popen": "os.popen() starts a program",
}
# Callees known by their last name whatever they are reached through.
METHODS = {
    "from_pretrained": "from_pretrained() may unpickle weights and run a model's own code",
    "load_dataset": "load_dataset() runs a dataset's loading script",
}
# Only with the submission: a folder on the import path runs at the next import.
PATH_CALLS = {
    "sys.path.insert": "it puts the submission on the import path, so an import runs its code",
    "sys.path.append": "it puts the submission on the import path, so an import runs its code",
    "site.addsitedir": "it puts the submission on the import path, so an import runs its code",
}


def keyword(call, name):
    """The keyword argument `name` of `call`, or None."""
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_true(node):
    return isinstance(node, ast.Constant) and node.value is True


def conditional_why(qualified, call):
    """Why a call that runs code only with some arguments does, or None."""
    if qualified == "torch.load":
        if is_true(keyword(call, "weights_only")):
            return None
        return "torch.load() without weights_only=True unpickles"
    if qualified == "numpy.load":
        allow = keyword(call, "allow_pickle")
        if allow is None or (isinstance(allow, ast.Constant) and not allow.value):
            return None
        return "numpy.load(allow_pickle=True) unpickles"
    if qualified == "yaml.load":
        loader = keyword(call, "Loader")
        if loader is None and len(call.args) > 1:
            loader = call.args[1]
        name = dotted(loader) or ""
        if name.split(".")[-1] in ("SafeLoader", "CSafeLoader", "BaseLoader"):
            return None
        return "yaml.load() without a safe loader builds any Python object"
    return None


def dotted(node):
    """`a.b.c` of a Name/Attribute chain, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class Aliases(ast.NodeVisitor):
    """Local name -> the module or object it stands for, from the imports."""

    def __init__(self):
        self.names = {}

    def visit_Import(self, node):
        for a in node.names:
            if a.asname:
                self.names[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.names[top] = top

    def visit_ImportFrom(self, node):
        if node.level or not node.module:
            return
        for a in node.names:
            self.names[a.asname or a.name] = f"{node.module}.{a.name}"


def qualify(func, aliases):
    """The callee's qualified name (`np.load` -> `numpy.load`), or None."""
    name = dotted(func)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def why_runs(call, aliases, tainted_args):
    """Why `call` runs code, or None. `tainted_args`: whether it gets the submission."""
    qualified = qualify(call.func, aliases)
    if qualified is not None:
        # `np` is `numpy`, and `pd` may be imported as `pandas` directly.
        for name in (qualified, qualified.replace("np.", "numpy.", 1), qualified.replace("pd.", "pandas.", 1)):
            if name in RUNS_CODE:
                return RUNS_CODE[name]
            why = conditional_why(name, call)
            if why:
                return why
            if name in PATH_CALLS and tainted_args:
                return PATH_CALLS[name]
    last = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    if last in METHODS:
        if last == "from_pretrained" and is_true(keyword(call, "use_safetensors")) \
                and not is_true(keyword(call, "trust_remote_code")):
            return None
        return METHODS[last]
    return None


def names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def targets_of(target):
    """The names an assignment to `target` binds or changes (`d[k] = x` changes d)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(targets_of(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return targets_of(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        base = target.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        return {base.id} if isinstance(base, ast.Name) else set()
    return set()


def spread(body_nodes, tainted, modules):
    """Grows `tainted` with every name given a value computed from it, to a
    fixed point (a module it is passed to, `os.path.join(t)`, is not)."""
    while True:
        before = len(tainted)
        for node in body_nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and names_in(sub.value) & tainted:
                    for t in sub.targets:
                        tainted |= targets_of(t)
                elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and sub.value is not None \
                        and names_in(sub.value) & tainted:
                    tainted |= targets_of(sub.target)
                elif isinstance(sub, ast.NamedExpr) and names_in(sub.value) & tainted:
                    tainted |= targets_of(sub.target)
                elif isinstance(sub, (ast.For, ast.AsyncFor, ast.comprehension)) and names_in(sub.iter) & tainted:
                    tainted |= targets_of(sub.target)
                elif isinstance(sub, (ast.With, ast.AsyncWith)):
                    for item in sub.items:
                        if item.optional_vars is not None and names_in(item.context_expr) & tainted:
                            tainted |= targets_of(item.optional_vars)
                elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                        and any(names_in(a) & tainted for a in list(sub.args) + [k.value for k in sub.keywords]):
                    # `x.update(tainted)`, `paths.append(tainted)`: x now holds it.
                    tainted |= targets_of(sub.func.value) - modules
        if len(tainted) == before:
            return tainted


class Scan:
    def __init__(self, tree):
        self.tree = tree
        finder = Aliases()
        finder.visit(tree)
        self.aliases = finder.names
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.found = {}
        self.seen = set()

    def report(self, node, why):
        self.found.setdefault(node.lineno, why)

    def module(self):
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                why = why_runs(node, self.aliases, False)
                if why:
                    self.report(node, why)

    def function(self, func, tainted_positions):
        """Calls in `func` that get what its tainted parameters hold."""
        key = (func.name, tainted_positions)
        if key in self.seen:
            return
        self.seen.add(key)
        params = [a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs]
        tainted = {p for i, p in enumerate(params) if i in tainted_positions or p in tainted_positions}
        if not tainted:
            return
        tainted = spread(func.body, set(tainted), set(self.aliases))
        for node in func.body:
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                args = list(call.args) + [k.value for k in call.keywords]
                gets = [bool(names_in(a) & tainted) for a in args]
                if not any(gets):
                    continue
                why = why_runs(call, self.aliases, True)
                if why:
                    self.report(call, why)
                callee = self.functions.get(getattr(call.func, "id", None))
                if callee is not None:
                    positions = {i for i, a in enumerate(call.args) if names_in(a) & tainted}
                    positions |= {k.arg for k in call.keywords if k.arg and names_in(k.value) & tainted}
                    self.function(callee, frozenset(positions))

    def get_score(self):
        func = self.functions.get("get_score")
        if func is not None:
            self.function(func, frozenset({0}))


def scan(mode, source, filename="<eval.py>"):
    scan = Scan(ast.parse(source, filename=filename))
    if mode == "module":
        scan.module()
    else:
        scan.get_score()
    return [{"line": line, "why": why} for line, why in sorted(scan.found.items())]


def main(argv):
    if len(argv) != 3 or argv[1] not in ("get_score", "module"):
        sys.exit("usage: mlrb_code_readers.py get_score|module <eval.py>")
    try:
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            source = f.read()
        found = scan(argv[1], source, argv[2])
    except (OSError, SyntaxError, ValueError, RecursionError) as e:
        detail = f"line {e.lineno}: {e.msg}" if isinstance(e, SyntaxError) else str(e)
        print(json.dumps({"error": f"{type(e).__name__}: {detail}"}))
        sys.exit(1)
    print(json.dumps({"found": found}))


if __name__ == "__main__":
    main(sys.argv)
