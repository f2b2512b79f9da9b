/**
 * scripts/check-rooms.mjs (run by `npm run check`) on planted trees: it must fail on an import circle, inside a
 * room as well as across rooms and through type-only imports, and on a wrong-way arrow; a clean tree passes.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { plantedCheck } from '../../helpers/planted-tree.ts';

const check = plantedCheck(join(import.meta.dirname, '../../../scripts/check-rooms.mjs'));

describe('check-rooms', () => {
  it('passes a tree whose imports point down and never go round', () => {
    const out = check({
      'base/a.ts': 'export const a = 1;\n',
      'base/b.ts': "import { a } from './a.ts';\nexport const b = a;\n",
      'daemon/x.ts': "import { b } from '../base/b.ts';\nexport const x = b;\n",
    });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });

  it('fails on a circle inside one room, naming the files round it', () => {
    const out = check({
      'daemon/server.ts': "import { serve } from './http.ts';\nexport const send = 1;\nserve();\n",
      'daemon/http.ts': "import { api } from './api.ts';\nexport function serve() {}\napi();\n",
      'daemon/api.ts': "import { send } from './server.ts';\nexport function api() {}\nvoid send;\n",
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('import circle: daemon/api.ts → daemon/server.ts → daemon/http.ts → daemon/api.ts');
  });

  it('fails on a circle of two files made of type-only imports', () => {
    const out = check({
      'multus/a.ts': "import type { B } from './b.ts';\nexport type A = B;\n",
      'multus/b.ts': "import type { A } from './a.ts';\nexport type B = A | 1;\n",
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('import circle: multus/a.ts → multus/b.ts → multus/a.ts');
  });

  it('fails on a lower room importing a higher one', () => {
    const out = check({
      'base/a.ts': "import { m } from '../multus/m.ts';\nexport const a = m;\n",
      'multus/m.ts': 'export const m = 1;\n',
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('base/a.ts (base) imports multus/m.ts (multus)');
  });
});
