/**
 * A runner's signs of life: every status it reports (a pass begun or done, a cycle, a page of
 * progress, a failure) is one. A runner with none for its bound is taken for stuck (runners.ts).
 */
export class Liveness {
  private at = Date.now();

  beat(): void {
    this.at = Date.now();
  }

  /** Milliseconds since the latest sign of life. */
  silentMs(now = Date.now()): number {
    return now - this.at;
  }
}
