import { RecordingReader } from './drivers/replay/format.ts';
const r = RecordingReader.open(process.argv[2]!);
const all: string[] = [];
while (r.next()) for (const n of r.takeNotes()) all.push(`${n.cycle} ${n.kind} ${JSON.stringify(n.data).slice(0, 110)}`);
for (const n of r.takeNotes()) all.push(`${n.cycle} ${n.kind} ${JSON.stringify(n.data).slice(0, 110)}`);
console.log(all.slice(-40).join('\n'), '\nframes', r.frame);
