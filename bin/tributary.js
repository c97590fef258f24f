#!/usr/bin/env -S node --max-semi-space-size=16 --expose-gc
// Runs the TypeScript sources directly through tsx: no build step between `npm install` and use.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
// `run` and `fake` keep the process alive with their servers; every other command ends here.
process.exitCode = code;
