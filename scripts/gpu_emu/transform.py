#!/usr/bin/env python3
"""GPU emulator (scripts/gpu_emu/): turns a .cu file of src/ops/gpu/ into C++ for g++.

    transform.py IN.cu OUT.cpp

- `callee<<<grid, block[, smem[, stream]]>>>(args);` becomes
  `::emu::launch("callee", __FILE__, __LINE__, grid, block, smem, [&] { callee(args); });`
  (callee: a kernel, a template-id such as k<true, W>, or a variable holding a kernel);
- `extern __shared__ T name[];` becomes `T* name = (T*)::emu::dynamic_smem();`;
- `constexpr int kWarp = …;` becomes an object converting to the emulated warp width.
Line numbers are kept (a #line directive names the original file), so compiler errors, asserts
and the emulator's messages point into src/ops/gpu/.
"""
import re
import sys


def split_top(s):
    parts, depth, cur = [], 0, ''
    for c in s:
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        if c == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += c
    parts.append(cur)
    return [p.strip() for p in parts]


def callee_start(src, j):
    """Start of the callee expression that ends just before src[j] ('<<<')."""
    k = j
    while k > 0 and src[k - 1].isspace():
        k -= 1
    end = k
    depth = 0
    while k > 0:
        c = src[k - 1]
        if c == '>':
            depth += 1
        elif c == '<':
            depth -= 1
        elif depth == 0 and not (c.isalnum() or c in '_:'):
            break
        k -= 1
    return k, end


def transform(src, path):
    out, i = [], 0
    while True:
        j = src.find('<<<', i)
        if j < 0:
            out.append(src[i:])
            break
        k, name_end = callee_start(src, j)
        name = src[k:name_end]
        e = src.find('>>>', j)
        cfg = split_top(src[j + 3:e])
        p = e + 3
        while src[p].isspace():
            p += 1
        if src[p] != '(':
            raise SystemExit(f'{path}: no argument list after >>> at offset {p}')
        a0, p, depth = p + 1, p + 1, 1
        while depth:
            if src[p] == '(':
                depth += 1
            elif src[p] == ')':
                depth -= 1
            p += 1
        args = src[a0:p - 1]
        grid, block = cfg[0], cfg[1]
        smem = cfg[2] if len(cfg) > 2 and cfg[2] else '0'
        flat_name = ' '.join(name.split())
        repl = (f'::emu::launch("{flat_name}", __FILE__, __LINE__, dim3({grid}), dim3({block}), '
                f'size_t({smem}), [&] {{ {name}({args}); }})')
        repl += '\n' * (src[k:p].count('\n') - repl.count('\n'))  # keep the line numbers
        out.append(src[i:k])
        out.append(repl)
        i = p
    text = ''.join(out)
    text = re.sub(r'extern\s+__shared__\s+((?:__align__\(\d+\)\s*)?)([\w:\s]+?)\s*(\w+)\s*\[\s*\]\s*;',
                  lambda m: f'{m.group(2)}* {m.group(3)} = reinterpret_cast<{m.group(2)}*>'
                            f'(::emu::dynamic_smem());', text)
    # kWarp (common.cuh): the emulator's warp width inside a kernel (ZAYA_EMU_WARP=64: AMD gfx9),
    # 32 in host code, as the host pass of hipcc sees it.
    text = re.sub(r'constexpr int kWarp = [^;]*;', 'inline constexpr ::emu::Warp kWarp{};', text)
    return f'#line 1 "{path}"\n' + text


if __name__ == '__main__':
    src_path, out_path = sys.argv[1], sys.argv[2]
    with open(src_path) as f:
        src = f.read()
    with open(out_path, 'w') as f:
        f.write(transform(src, src_path))
