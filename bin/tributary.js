#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx: no build step between `npm install` and use.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
// `run` keeps the process alive with its servers; every other command ends here.
if (process.argv[2] !== 'run' || code !== 0) process.exitCode = code;
