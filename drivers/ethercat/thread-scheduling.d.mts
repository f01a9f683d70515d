// Types of thread-scheduling.mjs (plain JavaScript, so that the cycle thread's entry shim runs it before the TypeScript loader).
export declare function schedulingOf(statPath?: string): string | undefined;
export declare function raiseToFifo(priority: number): string;
export declare function toNormalScheduling(): string;
