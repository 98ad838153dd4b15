// Failures a plugin understood, as opposed to a crash (any other exception). Throw one from
// `gather`.

/** Base class of the failures `gather` may throw; throw one of its subclasses. */
export class GatherError extends Error {
  /** The contract's `gather-error` variant case. */
  get tag() {
    return "failed";
  }
}

/** The parameters were acceptable to the host but not to the plugin. */
export class InvalidParameters extends GatherError {
  get tag() {
    return "invalid-parameters";
  }
}

/** What the plugin gathers does not exist here (no such file, a capability not granted). */
export class Unavailable extends GatherError {
  get tag() {
    return "unavailable";
  }
}

/** Anything else; the message says what went wrong. */
export class Failed extends GatherError {}

for (const cls of [GatherError, InvalidParameters, Unavailable, Failed]) {
  Object.defineProperty(cls.prototype, "name", { value: cls.name });
}
