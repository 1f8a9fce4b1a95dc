/**
 * Gathers the calls made while a batch is being written, or in the same turn of the event loop,
 * into one statement: the group commit a database does for concurrent transactions, done before
 * the statement so that twenty concurrent claims cost one round trip and one commit instead of
 * twenty. At most one batch is in flight; calls that arrive meanwhile form the next one. Each
 * call still gets its own answer (`run` returns one per input, in order); when the statement
 * fails, every call in the batch rejects with its error, as each would have alone.
 */
export class Batch<In, Out> {
  readonly #run: (inputs: readonly In[]) => Promise<readonly Out[]>
  readonly #max: number
  #waiting: { input: In; resolve: (out: Out) => void; reject: (error: unknown) => void }[] = []
  #busy = false

  constructor(run: (inputs: readonly In[]) => Promise<readonly Out[]>, max: number) {
    this.#run = run
    this.#max = max
  }

  /** The inputs waiting for the next batch (to keep an id out of a batch that has it already). */
  get waiting(): readonly { readonly input: In }[] {
    return this.#waiting
  }

  add(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.#waiting.push({ input, resolve, reject })
      if (this.#busy) return
      this.#busy = true
      // The rest of this turn's calls join it.
      setImmediate(() => this.#next())
    })
  }

  #next(): void {
    const batch = this.#waiting.splice(0, this.#max)
    if (batch.length === 0) {
      this.#busy = false
      return
    }
    this.#run(batch.map((call) => call.input)).then(
      (outs) => {
        batch.forEach((call, i) => call.resolve(outs[i] as Out))
        this.#next()
      },
      (error: unknown) => {
        for (const call of batch) call.reject(error)
        this.#next()
      },
    )
  }
}
