// What both JS SDK programs bound every call and stream with: the wait
// only stops a hang, it never measures speed.

export const TIMEOUT_MS = 30_000;

// `promise`, or a rejection naming `what` after TIMEOUT_MS.
export function withTimeout(promise, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}
