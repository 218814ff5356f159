/**
 * Builds Conveyor's WebAssembly kernels from their C sources in this
 * folder, with Debian's `clang` (wasm32 target) and `wabt`, at build time
 * only: the package ships the results, `conveyor_simd128.wasm.b64` and
 * `conveyor_relaxed.wasm.b64` (base64 text, imported as text by
 * `src/tensor/cpu/_wasm_module.ts`), and imports nothing at run time.
 *
 *   deno task build:wasm
 *
 * Two variants of the one translation unit `conveyor.c`:
 * - simd128: WebAssembly SIMD128, multiply then add;
 * - relaxed: compiled with `-DCONVEYOR_RELAXED`, whose `MADD` calls the
 *   never-inlined `conveyor_madd`; each such call in the text form is
 *   replaced here with the relaxed-SIMD instruction `f32x4.relaxed_madd`
 *   (clang 14 has no intrinsic for the final opcode). The call passes its
 *   three operands in the instruction's order, so the swap is exact.
 *
 * Both use one imported shared memory (threads), export their kernels,
 * `__heap_base` (where the backend's allocator starts) and
 * `__stack_pointer` (each thread sets its own stack). A test rebuilds them
 * and fails if the shipped text differs (`tests/tensor/cpu/wasm_build_test.ts`).
 *
 * @module
 */

const HERE = new URL("./", import.meta.url);

/** The shipped files, by variant. */
export const WASM_FILES = {
  simd128: "conveyor_simd128.wasm.b64",
  relaxed: "conveyor_relaxed.wasm.b64",
} as const;

/** The build tools, for a test that skips where they are missing. */
export const WASM_TOOLS: readonly string[] = ["clang", "wasm-ld", "wasm2wat", "wat2wasm"];

const CLANG_FLAGS = [
  "--target=wasm32",
  "-O3",
  "-msimd128",
  "-matomics",
  "-mbulk-memory",
  "-mmutable-globals",
  "-nostdlib",
  "-Wall",
  "-Werror",
  "-Wno-unused-function",
  "-Wno-unused-parameter",
  "-Wl,--no-entry",
  "-Wl,--import-memory",
  "-Wl,--shared-memory",
  "-Wl,--max-memory=4294967296",
  "-Wl,--export-dynamic",
  "-Wl,--export=__stack_pointer",
  "-Wl,--export=__heap_base",
  "-Wl,-z,stack-size=65536",
];

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

/** Builds one variant in `tmp` and returns its base64 text (with a final newline). */
async function buildVariant(relaxed: boolean, tmp: string): Promise<string> {
  const src = new URL("conveyor.c", HERE).pathname;
  const obj = `${tmp}/${relaxed ? "relaxed" : "simd128"}.wasm`;
  await run("clang", [...CLANG_FLAGS, ...(relaxed ? ["-DCONVEYOR_RELAXED"] : []), "-o", obj, src]);
  let wat = await run("wasm2wat", ["--enable-threads", obj]);
  if (relaxed) {
    const calls = wat.match(/call \$conveyor_madd\b/g)?.length ?? 0;
    if (calls === 0) throw new Error("relaxed build: no call of conveyor_madd to replace");
    wat = wat.replace(/call \$conveyor_madd\b/g, "f32x4.relaxed_madd");
  }
  const watPath = `${obj}.wat`;
  await Deno.writeTextFile(watPath, wat);
  const final = `${obj}.final.wasm`;
  await run("wat2wasm", ["--enable-threads", "--enable-relaxed-simd", watPath, "-o", final]);
  const bytes = await Deno.readFile(final);
  return bytes.toBase64() + "\n";
}

/**
 * Builds both variants and returns their base64 texts by file name
 * (nothing is written).
 */
export async function buildWasm(): Promise<Record<string, string>> {
  // Beside the sources, so that the task needs no access outside this folder.
  const tmp = await Deno.makeTempDir({ dir: new URL(".", HERE).pathname, prefix: ".build-" });
  try {
    return {
      [WASM_FILES.simd128]: await buildVariant(false, tmp),
      [WASM_FILES.relaxed]: await buildVariant(true, tmp),
    };
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

if (import.meta.main) {
  for (const [name, text] of Object.entries(await buildWasm())) {
    await Deno.writeTextFile(new URL(name, HERE), text);
    console.log(`kernels/wasm/${name}: ${Math.round(text.length * 3 / 4)} bytes`);
  }
}
