// The second half of the model's mutation check (harness/model/mutation.ts, harness/model/variants.ts).
import { mutationTests } from './mutation.ts';

mutationTests('wrong-model variants are rejected by the reference stack (second half)', (_w, i) => i % 2 === 1);
