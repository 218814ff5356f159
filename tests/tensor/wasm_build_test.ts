/**
 * The shipped WebAssembly kernels (`kernels/wasm/*.wasm.b64`) are what their
 * C sources build to: a rebuild with Debian's clang and wabt gives the
 * same bytes. Skipped, saying so, where the tools are missing (a user's
 * machine); CI's `.ci/run` installs them and sets CONVEYOR_REQUIRE_WASM_TOOLS=1,
 * which turns their absence into a failure.
 */

import assert from "node:assert/strict";
import { buildWasm, WASM_FILES, WASM_TOOLS } from "../../kernels/wasm/build.ts";

async function missingTools(): Promise<string[]> {
  const missing: string[] = [];
  for (const tool of WASM_TOOLS) {
    try {
      const out = await new Deno.Command(tool, {
        args: ["--version"],
        stdout: "null",
        stderr: "null",
      })
        .output();
      if (!out.success) missing.push(tool);
    } catch {
      missing.push(tool);
    }
  }
  return missing;
}

const missing = await missingTools();
const required = Deno.env.get("CONVEYOR_REQUIRE_WASM_TOOLS") === "1";
if (missing.length > 0 && !required) {
  console.log(
    `wasm_build_test: SKIPPED (${missing.join(", ")} not found; install clang, lld and wabt ` +
      `to check that the shipped kernels are their sources' build)`,
  );
}

Deno.test({
  name: "the shipped WebAssembly kernels equal a rebuild from kernels/wasm/*.c",
  ignore: missing.length > 0 && !required,
  async fn() {
    assert.deepEqual(missing, [], `the build tools are missing: ${missing.join(", ")}`);
    const built = await buildWasm();
    for (const name of Object.values(WASM_FILES)) {
      const shipped = await Deno.readTextFile(
        new URL(`../../kernels/wasm/${name}`, import.meta.url),
      );
      assert.ok(
        shipped === built[name],
        `kernels/wasm/${name} differs from a rebuild of its sources: run deno task build:wasm`,
      );
    }
  },
});
