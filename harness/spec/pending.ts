export const pending: Readonly<Record<string, string>> = {};
