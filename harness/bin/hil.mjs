#!/usr/bin/env node
// The `hil` command. TypeScript sources run through tsx's loader, so nothing needs compiling after npm ci.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli.ts');
const code = await main(process.argv.slice(2));
if (typeof code === 'number') process.exitCode = code;
