/** cli.ts: the bundle's entry point; `main.ts` stays importable without side effects. */
import { run } from './host/main.ts';

run();
