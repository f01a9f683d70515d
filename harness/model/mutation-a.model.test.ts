// The first half of the model's mutation check (harness/model/mutation.ts, harness/model/variants.ts).
import { mutationTests } from './mutation.ts';

mutationTests('wrong-model variants are rejected by the reference stack (first half)', (_w, i) => i % 2 === 0);
