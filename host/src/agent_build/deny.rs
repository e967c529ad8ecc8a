//! Closing the WASI doors a language runtime imports but an agent never gets.
//!
//! componentize-py links CPython with all of wasi-libc, so every Python
//! agent imports `wasi:sockets/*` and `wasi:filesystem/preopens` whether it
//! uses them or not — and `mlrb agent check` rightly refuses such a
//! component. The build therefore generates a small *deny* component that
//! exports exactly those interfaces, at the versions the agent imports, and
//! composes it into the agent: the result no longer imports them at all.
//!
//! What the deny component answers:
//! * functions returning `result<_, error-code>` (creating a socket, name
//!   lookup): `err(access-denied)`, so `socket.socket()` raises in Python;
//! * functions returning a list (`get-directories`): the empty list;
//! * functions returning a handle of a resource it exports
//!   (`instance-network`): a fresh handle, usable only to be refused again;
//! * anything else (methods of a socket that can never exist): a trap.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use wit_component::{ComponentEncoder, DecodedWasm, StringEncoding};
use wit_parser::abi::WasmType;
use wit_parser::{
    Function, Handle, Int, LiftLowerAbi, ManglingAndAbi, Resolve, ResourceIntrinsic, SizeAlign, Type, TypeDefKind,
    TypeId, WasmExport, WasmExportKind, WasmImport, WorldItem, WorldKey,
};

/// Interfaces an agent component may import only to have them closed here.
pub fn is_closed(interface: &str) -> bool {
    interface.starts_with("wasi:sockets/") || interface.starts_with("wasi:filesystem/preopens@")
}

const MANGLING: ManglingAndAbi = ManglingAndAbi::Legacy(LiftLowerAbi::Sync);
/// Where the canned answers live in the deny module's memory.
const EMPTY_LIST_AT: u32 = 0;
const DENIED_AT: u32 = 64;
/// The bump allocator for arguments the host copies in starts here.
const HEAP_START: u32 = 1024;

/// The closed interfaces `component` imports (empty: nothing to do).
pub fn closed_imports(component: &[u8]) -> Result<Vec<String>> {
    let (resolve, world) = decode(component)?;
    Ok(closed_in(&resolve, world))
}

fn closed_in(resolve: &Resolve, world: wit_parser::WorldId) -> Vec<String> {
    resolve.worlds[world]
        .imports
        .keys()
        .map(|key| resolve.name_world_key(key))
        .filter(|name| is_closed(name))
        .collect()
}

fn decode(component: &[u8]) -> Result<(Resolve, wit_parser::WorldId)> {
    match wit_component::decode(component).context("reading the component's imports")? {
        DecodedWasm::Component(resolve, world) => Ok((resolve, world)),
        DecodedWasm::WitPackage(..) => bail!("a WIT package, not a component"),
    }
}

/// A component exporting the closed interfaces `component` imports, at
/// the same versions, or `None` when it imports none.
pub fn deny_component(component: &[u8]) -> Result<Option<Vec<u8>>> {
    let (mut resolve, agent_world) = decode(component)?;
    let closed = closed_in(&resolve, agent_world);
    if closed.is_empty() {
        return Ok(None);
    }
    let mut wit = String::from("package mlrb:deny;\n\nworld deny {\n");
    for name in &closed {
        writeln!(wit, "    export {name};").unwrap();
    }
    wit.push_str("}\n");
    let package = resolve
        .push_str("deny.wit", &wit)
        .context("describing the deny world")?;
    let world = resolve.select_world(&[package], Some("deny"))?;

    let wat = deny_module_wat(&resolve, world);
    let mut module = wat::parse_str(&wat).context("assembling the deny module")?;
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)?;
    let encoded = ComponentEncoder::default()
        .module(&module)?
        .validate(true)
        .encode()
        .context("encoding the deny component")?;
    Ok(Some(encoded))
}

/// The core module behind the deny world, as WebAssembly text.
fn deny_module_wat(resolve: &Resolve, world: wit_parser::WorldId) -> String {
    let mut sizes = SizeAlign::default();
    sizes.fill(resolve);
    let mut parts = WatParts::default();
    for (key, item) in &resolve.worlds[world].exports {
        let WorldItem::Interface { id, .. } = item else {
            continue;
        };
        for func in resolve.interfaces[*id].functions.values() {
            let sig = resolve.wasm_signature(MANGLING.export_variant(), func);
            let export = WasmExport::Func {
                interface: Some(key),
                func,
                kind: WasmExportKind::Normal,
            };
            let name = resolve.wasm_export_name(MANGLING, export);
            let body = parts.body(resolve, answer(resolve, &sizes, func));
            write!(parts.funcs, "(func (export {name:?})").unwrap();
            push_types(&mut parts.funcs, "param", &sig.params);
            push_types(&mut parts.funcs, "result", &sig.results);
            // Arguments copied in for this call are garbage once it returns.
            writeln!(parts.funcs, " i32.const {HEAP_START} global.set $bump {body})").unwrap();
        }
    }
    parts.module(resolve)
}

/// The pieces of the deny module's text, gathered function by function.
#[derive(Default)]
struct WatParts {
    imports: String,
    funcs: String,
    data: String,
    denied_written: std::collections::HashSet<(u32, u8)>,
}

impl WatParts {
    /// The instructions that give `answer`, adding the data or imports it needs.
    fn body(&mut self, resolve: &Resolve, answer: Answer<'_>) -> String {
        match answer {
            Answer::EmptyList => format!("i32.const {EMPTY_LIST_AT}"),
            Answer::Denied { tag_at, code } => {
                // One canned `err(code)` per payload offset.
                let at = DENIED_AT + 16 * tag_at;
                if self.denied_written.insert((tag_at, code)) {
                    let mut bytes = vec![0u8; tag_at as usize + 1];
                    bytes[0] = 1; // the `err` case
                    bytes[tag_at as usize] = code;
                    let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
                    writeln!(self.data, "(data (i32.const {at}) \"{escaped}\")").unwrap();
                }
                format!("i32.const {at}")
            }
            Answer::NewHandle { resource, owner } => {
                let intrinsic = WasmImport::ResourceIntrinsic {
                    interface: Some(owner),
                    resource,
                    intrinsic: ResourceIntrinsic::ExportedNew,
                };
                let (module, intrinsic) = resolve.wasm_import_name(MANGLING, intrinsic);
                let local = format!("$new_{}", resource.index());
                if !self.imports.contains(&local) {
                    let import = format!("(import {module:?} {intrinsic:?} (func {local} (param i32) (result i32)))");
                    writeln!(self.imports, "{import}").unwrap();
                }
                format!("i32.const 1 call {local}")
            }
            Answer::Trap => "unreachable".to_string(),
        }
    }

    /// The whole module: memory, a bump allocator, the functions, the data.
    fn module(self, resolve: &Resolve) -> String {
        let Self {
            imports, funcs, data, ..
        } = self;
        let realloc = resolve.wasm_export_name(MANGLING, WasmExport::Realloc);
        let memory = resolve.wasm_export_name(MANGLING, WasmExport::Memory);
        format!(
            r#"(module
{imports}
(memory (export {memory:?}) 1)
(global $bump (mut i32) (i32.const {HEAP_START}))
;; A bump allocator for the arguments the host copies in (names to look up).
(func (export {realloc:?}) (param i32 i32 i32 i32) (result i32) (local $at i32) (local $end i32)
  (local.set $at (i32.and (i32.add (global.get $bump) (i32.sub (local.get 2) (i32.const 1)))
                          (i32.xor (i32.sub (local.get 2) (i32.const 1)) (i32.const -1))))
  (local.set $end (i32.add (local.get $at) (local.get 3)))
  (if (i32.gt_u (local.get $end) (i32.shl (memory.size) (i32.const 16)))
    (then (if (i32.eq (memory.grow (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size))) (i32.const -1))
      (then unreachable))))
  (global.set $bump (local.get $end))
  (local.get $at))
{funcs}
{data}
)"#
        )
    }
}

enum Answer<'a> {
    EmptyList,
    Denied { tag_at: u32, code: u8 },
    NewHandle { resource: TypeId, owner: &'a WorldKey },
    Trap,
}

fn answer<'a>(resolve: &'a Resolve, sizes: &SizeAlign, func: &Function) -> Answer<'a> {
    let Some(result) = func.result else { return Answer::Trap };
    let Some(result) = dealias(resolve, result) else {
        return Answer::Trap;
    };
    match &resolve.types[result].kind {
        TypeDefKind::List(_) => Answer::EmptyList,
        TypeDefKind::Result(r) => {
            let Some(err) = r.err else { return Answer::Trap };
            let Some(TypeDefKind::Enum(e)) = dealias(resolve, err).map(|id| &resolve.types[id].kind) else {
                return Answer::Trap;
            };
            let Some(code) = e.cases.iter().position(|c| c.name == "access-denied") else {
                return Answer::Trap;
            };
            let tag_at = sizes
                .payload_offset(Int::U8, [r.ok.as_ref(), r.err.as_ref()])
                .size_wasm32() as u32;
            Answer::Denied {
                tag_at,
                code: code as u8,
            }
        }
        TypeDefKind::Handle(Handle::Own(resource)) => {
            let Some(resource) = dealias(resolve, Type::Id(*resource)) else {
                return Answer::Trap;
            };
            let owner = resolve.types[resource].owner;
            let key = match owner {
                wit_parser::TypeOwner::Interface(id) => resolve.worlds.iter().find_map(|(_, w)| {
                    w.exports
                        .iter()
                        .find(|(_, item)| matches!(item, WorldItem::Interface { id: i, .. } if *i == id))
                        .map(|(k, _)| k)
                }),
                _ => None,
            };
            match key {
                Some(owner) => Answer::NewHandle { resource, owner },
                None => Answer::Trap,
            }
        }
        _ => Answer::Trap,
    }
}

/// Follows `type x = y` aliases (as `use` creates) to the defining type;
/// `None` for a primitive.
fn dealias(resolve: &Resolve, ty: Type) -> Option<TypeId> {
    let Type::Id(mut id) = ty else { return None };
    while let TypeDefKind::Type(Type::Id(next)) = resolve.types[id].kind {
        id = next;
    }
    Some(id)
}

fn push_types(out: &mut String, what: &str, types: &[WasmType]) {
    if types.is_empty() {
        return;
    }
    write!(out, " ({what}").unwrap();
    for ty in types {
        out.push_str(match ty {
            WasmType::I32 | WasmType::Pointer | WasmType::Length => " i32",
            WasmType::I64 | WasmType::PointerOrI64 => " i64",
            WasmType::F32 => " f32",
            WasmType::F64 => " f64",
        });
    }
    out.push(')');
}

/// `agent` with its closed imports filled by a generated deny component.
/// Returns it unchanged when it imports none of them.
pub fn close_imports(agent: &[u8]) -> Result<Vec<u8>> {
    let Some(deny) = deny_component(agent)? else {
        return Ok(agent.to_vec());
    };
    let dir = tempfile::tempdir()?;
    let agent_path = dir.path().join("agent.wasm");
    let deny_path = dir.path().join("deny.wasm");
    std::fs::write(&agent_path, agent)?;
    std::fs::write(&deny_path, &deny)?;
    let config = wasm_compose::config::Config {
        dir: dir.path().to_path_buf(),
        definitions: vec![deny_path],
        ..Default::default()
    };
    let composed = wasm_compose::composer::ComponentComposer::new(&agent_path, &config)
        .compose()
        .context("composing the agent with its deny component")?;
    let left = closed_imports(&composed)?;
    if !left.is_empty() {
        bail!("the composed agent still imports {}", left.join(", "));
    }
    Ok(composed)
}
