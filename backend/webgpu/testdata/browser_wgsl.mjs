// Compiles WGSL kernels with the browser's WebGPU (Chromium's Tint, on SwiftShader), which
// checks what gogpu's naga does not, such as WGSL's uniformity rules for barriers.
//
//   node backend/webgpu/testdata/browser_wgsl.mjs URL KERNELS.json
//
// URL is any page of a server on this machine (WebGPU needs a secure context, which
// http://127.0.0.1 is); KERNELS.json is [{name, entry, code}]. It prints one JSON line: the
// adapter and, for each kernel, the errors of its shader module and compute pipeline. Exits 1
// if WebGPU is missing.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';

const [url, file] = process.argv.slice(2);
if (!url || !file) {
  console.error('usage: node browser_wgsl.mjs URL KERNELS.json');
  process.exit(2);
}
const kernels = JSON.parse(readFileSync(file, 'utf8'));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', '--enable-unsafe-swiftshader', '--use-webgpu-adapter=swiftshader', '--no-sandbox'],
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  const res = await page.evaluate(async (kernels) => {
    if (!navigator.gpu) return { missing: 'navigator.gpu' };
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { missing: 'a WebGPU adapter' };
    const device = await adapter.requestDevice();
    const out = [];
    for (const k of kernels) {
      const errors = [];
      device.pushErrorScope('validation');
      const module = device.createShaderModule({ code: k.code });
      const info = await module.getCompilationInfo();
      for (const m of info.messages) {
        if (m.type === 'error') errors.push(`${m.lineNum}:${m.linePos}: ${m.message}`);
      }
      if (errors.length === 0) {
        try {
          await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: k.entry } });
        } catch (e) {
          errors.push('pipeline: ' + e.message);
        }
      }
      const scope = await device.popErrorScope();
      if (scope && errors.length === 0) errors.push(scope.message);
      out.push({ name: k.name, errors });
    }
    return { adapter: adapter.info ? adapter.info.description || adapter.info.vendor : '', kernels: out };
  }, kernels);
  console.log(JSON.stringify(res));
  if (res.missing) process.exit(1);
} finally {
  await browser.close();
}
