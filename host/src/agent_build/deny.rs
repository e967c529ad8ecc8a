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
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, EntityType, ExportKind, ExportSection, FunctionSection,
    GlobalSection, GlobalType, ImportSection, Instruction, MemorySection, MemoryType, Module, TypeSection, ValType,
};
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

    let mut module = deny_module(&resolve, world);
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)?;
    let encoded = ComponentEncoder::default()
        .module(&module)?
        .validate(true)
        .encode()
        .context("encoding the deny component")?;
    Ok(Some(encoded))
}

/// The core module behind the deny world.
fn deny_module(resolve: &Resolve, world: wit_parser::WorldId) -> Vec<u8> {
    let mut sizes = SizeAlign::default();
    sizes.fill(resolve);
    let mut parts = ModuleParts::default();
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
            // Arguments copied in for this call are garbage once it returns.
            let mut body = vec![Instruction::I32Const(HEAP_START as i32), Instruction::GlobalSet(BUMP)];
            body.extend(parts.body(resolve, answer(resolve, &sizes, func)));
            parts.funcs.push(Func {
                name: resolve.wasm_export_name(MANGLING, export),
                params: val_types(&sig.params),
                results: val_types(&sig.results),
                locals: 0,
                body,
            });
        }
    }
    parts.module(resolve)
}

/// An exported function of the deny module.
struct Func {
    name: String,
    params: Vec<ValType>,
    results: Vec<ValType>,
    /// i32 locals after the parameters.
    locals: u32,
    body: Vec<Instruction<'static>>,
}

/// The pieces of the deny module, gathered function by function.
#[derive(Default)]
struct ModuleParts {
    /// Imported resource constructors, `(module, name)`; function index = position.
    imports: Vec<(String, String)>,
    funcs: Vec<Func>,
    data: Vec<(u32, Vec<u8>)>,
}

/// The bump allocator's global.
const BUMP: u32 = 0;

impl ModuleParts {
    /// The instructions that give `answer`, adding the data or imports it needs.
    fn body(&mut self, resolve: &Resolve, answer: Answer<'_>) -> Vec<Instruction<'static>> {
        match answer {
            Answer::EmptyList => vec![Instruction::I32Const(EMPTY_LIST_AT as i32)],
            Answer::Denied { tag_at, code } => {
                // One canned `err(code)` per payload offset.
                let at = DENIED_AT + 16 * tag_at;
                if !self.data.iter().any(|(written, _)| *written == at) {
                    let mut bytes = vec![0u8; tag_at as usize + 1];
                    bytes[0] = 1; // the `err` case
                    bytes[tag_at as usize] = code;
                    self.data.push((at, bytes));
                }
                vec![Instruction::I32Const(at as i32)]
            }
            Answer::NewHandle { resource, owner } => {
                let intrinsic = WasmImport::ResourceIntrinsic {
                    interface: Some(owner),
                    resource,
                    intrinsic: ResourceIntrinsic::ExportedNew,
                };
                let import = resolve.wasm_import_name(MANGLING, intrinsic);
                let index = match self.imports.iter().position(|i| *i == import) {
                    Some(index) => index,
                    None => {
                        self.imports.push(import);
                        self.imports.len() - 1
                    }
                };
                vec![Instruction::I32Const(1), Instruction::Call(index as u32)]
            }
            Answer::Trap => vec![Instruction::Unreachable],
        }
    }

    /// The whole module: memory, a bump allocator, the functions, the data.
    fn module(self, resolve: &Resolve) -> Vec<u8> {
        let (mut types, mut imports, mut functions) =
            (TypeSection::new(), ImportSection::new(), FunctionSection::new());
        let (mut exports, mut code, mut data) = (ExportSection::new(), CodeSection::new(), DataSection::new());
        // Type 0: a resource constructor, `(rep: i32) -> handle: i32`.
        types.ty().function([ValType::I32], [ValType::I32]);
        for (module, name) in &self.imports {
            imports.import(module, name, EntityType::Function(0));
        }
        let first = self.imports.len() as u32;
        let funcs = std::iter::once(realloc(resolve)).chain(self.funcs);
        for (i, func) in funcs.enumerate() {
            functions.function(types.len());
            types.ty().function(func.params, func.results);
            exports.export(&func.name, ExportKind::Func, first + i as u32);
            let mut body = wasm_encoder::Function::new([(func.locals, ValType::I32)]);
            for instruction in &func.body {
                body.instruction(instruction);
            }
            body.instruction(&Instruction::End);
            code.function(&body);
        }
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        exports.export(
            &resolve.wasm_export_name(MANGLING, WasmExport::Memory),
            ExportKind::Memory,
            0,
        );
        let mut globals = GlobalSection::new();
        let bump = GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        };
        globals.global(bump, &ConstExpr::i32_const(HEAP_START as i32));
        for (at, bytes) in self.data {
            data.active(0, &ConstExpr::i32_const(at as i32), bytes);
        }
        let mut module = Module::new();
        module
            .section(&types)
            .section(&imports)
            .section(&functions)
            .section(&memories);
        module.section(&globals).section(&exports).section(&code).section(&data);
        module.finish()
    }
}

/// `cabi_realloc`: a bump allocator for the arguments the host copies in
/// (names to look up); memory grows as needed.
fn realloc(resolve: &Resolve) -> Func {
    use Instruction::*;
    let (align, size, at, end) = (2, 3, 4, 5);
    #[rustfmt::skip]
    let body = vec![
        // at = (bump + align - 1) & !(align - 1)
        GlobalGet(BUMP), LocalGet(align), I32Const(1), I32Sub, I32Add,
        LocalGet(align), I32Const(1), I32Sub, I32Const(-1), I32Xor, I32And, LocalSet(at),
        LocalGet(at), LocalGet(size), I32Add, LocalSet(end),
        // Past the memory's end: grow it to cover `end`, or trap.
        LocalGet(end), MemorySize(0), I32Const(16), I32Shl, I32GtU, If(BlockType::Empty),
        LocalGet(end), I32Const(65535), I32Add, I32Const(16), I32ShrU, MemorySize(0), I32Sub,
        MemoryGrow(0), I32Const(-1), I32Eq, If(BlockType::Empty), Unreachable, End,
        End,
        LocalGet(end), GlobalSet(BUMP),
        LocalGet(at),
    ];
    Func {
        name: resolve.wasm_export_name(MANGLING, WasmExport::Realloc),
        params: vec![ValType::I32; 4],
        results: vec![ValType::I32],
        locals: 2,
        body,
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

fn val_types(types: &[WasmType]) -> Vec<ValType> {
    types
        .iter()
        .map(|ty| match ty {
            WasmType::I32 | WasmType::Pointer | WasmType::Length => ValType::I32,
            WasmType::I64 | WasmType::PointerOrI64 => ValType::I64,
            WasmType::F32 => ValType::F32,
            WasmType::F64 => ValType::F64,
        })
        .collect()
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
