// Typed errors: every failure the daemon reports is a `ToolError` with `kind`, `message` and
// `hint` (docs/PROTOCOL.md §7), thrown as the subclass of its kind so callers can test
// `e instanceof NotFoundError`. Problems of the connection itself are `ConnectionProblem`.

import type { ErrorKind, ToolErrorData } from "./frames.js";

/** Base of everything this package throws. */
export class ToolvisorError extends Error {}

/** The socket could not be used: not connectable, closed, a malformed frame, or a server that
 * another user may have put there (refused before anything was sent). */
export class ConnectionProblem extends ToolvisorError {
  override name = "ConnectionProblem";
}

/** A failure reported by the daemon: a call's `err` outcome, a refused handshake, or a
 * frame-level `error`. */
export class ToolError extends ToolvisorError {
  override name = "ToolError";
  readonly kind: ErrorKind | string;
  /** What to do about it (may be empty). `message` is the daemon's message as sent. */
  readonly hint: string;

  constructor(kind: ErrorKind | string, message: string, hint = "") {
    super(message);
    this.kind = kind;
    this.hint = hint;
  }

  /** The protocol's `ToolError` object, e.g. for a bridge result. */
  toWire(): ToolErrorData {
    return { kind: this.kind as ErrorKind, message: this.message, hint: this.hint };
  }

  /** The subclass for `data.kind` (`ToolError` itself for a kind this client does not know). */
  static fromWire(data: ToolErrorData): ToolError {
    const cls = ERRORS_BY_KIND[data.kind as ErrorKind] ?? ToolError;
    return new cls(data.kind, data.message ?? "", data.hint ?? "");
  }
}

/** Arguments missing, of the wrong type, or out of range. */
export class InvalidArgsError extends ToolError {
  override name = "InvalidArgsError";
}

/** No tool of that name. */
export class UnknownToolError extends ToolError {
  override name = "UnknownToolError";
}

/** The tool exists but cannot run here. */
export class NotAvailableError extends ToolError {
  override name = "NotAvailableError";
}

/** The operator's policy denies the tool. */
export class PolicyDeniedError extends ToolError {
  override name = "PolicyDeniedError";
}

/** The call was not approved. */
export class ApprovalDeniedError extends ToolError {
  override name = "ApprovalDeniedError";
}

/** The tool's tier is above the client's max_tier. */
export class SurfaceDeniedError extends ToolError {
  override name = "SurfaceDeniedError";
}

/** Something ran out of time. */
export class ToolTimeoutError extends ToolError {
  override name = "ToolTimeoutError";
}

/** The call was cancelled. */
export class CallCancelledError extends ToolError {
  override name = "CallCancelledError";
}

/** The resource behind the tool failed. */
export class ResourceFailedError extends ToolError {
  override name = "ResourceFailedError";
}

/** The resource is still starting. */
export class NotReadyError extends ToolError {
  override name = "NotReadyError";
}

/** The resource is busy or at a limit. */
export class BusyError extends ToolError {
  override name = "BusyError";
}

/** The thing named does not exist. */
export class NotFoundError extends ToolError {
  override name = "NotFoundError";
}

/** Outside the conversation, session or workdir. */
export class OutOfScopeError extends ToolError {
  override name = "OutOfScopeError";
}

/** A stored-result reference is malformed. */
export class InvalidRefError extends ToolError {
  override name = "InvalidRefError";
}

/** A frame broke the protocol. */
export class ProtocolError extends ToolError {
  override name = "ProtocolError";
}

/** Client and daemon speak different protocol versions. */
export class VersionMismatchError extends ToolError {
  override name = "VersionMismatchError";
}

/** The daemon refused the connection. */
export class RefusedError extends ToolError {
  override name = "RefusedError";
}

/** An operating-system error. */
export class IoError extends ToolError {
  override name = "IoError";
}

/** No person is attached to answer a question. */
export class NoHumanError extends ToolError {
  override name = "NoHumanError";
}

/** An interpreter kernel died. */
export class KernelDiedError extends ToolError {
  override name = "KernelDiedError";
}

/** A session outlived its hard TTL. */
export class ExpiredError extends ToolError {
  override name = "ExpiredError";
}

/** Files changed since a change was staged. */
export class ConflictError extends ToolError {
  override name = "ConflictError";
}

/** A daemon bug, or a reply too large for max_frame. */
export class InternalError extends ToolError {
  override name = "InternalError";
}

/** The daemon is draining; retry against the next one. */
export class ShuttingDownError extends ToolError {
  override name = "ShuttingDownError";
}

/** A network endpoint the tool needs (the model hub) cannot be reached. */
export class NetworkUnavailableError extends ToolError {
  override name = "NetworkUnavailableError";
}

/** The class thrown for each kind (the compiler checks every kind has one). */
export const ERRORS_BY_KIND: Record<ErrorKind, new (kind: string, message: string, hint?: string) => ToolError> = {
  invalid_args: InvalidArgsError,
  unknown_tool: UnknownToolError,
  not_available: NotAvailableError,
  policy_denied: PolicyDeniedError,
  approval_denied: ApprovalDeniedError,
  surface_denied: SurfaceDeniedError,
  timeout: ToolTimeoutError,
  cancelled: CallCancelledError,
  resource_failed: ResourceFailedError,
  not_ready: NotReadyError,
  busy: BusyError,
  not_found: NotFoundError,
  out_of_scope: OutOfScopeError,
  invalid_ref: InvalidRefError,
  protocol: ProtocolError,
  version_mismatch: VersionMismatchError,
  refused: RefusedError,
  io: IoError,
  no_human: NoHumanError,
  kernel_died: KernelDiedError,
  expired: ExpiredError,
  conflict: ConflictError,
  internal: InternalError,
  shutting_down: ShuttingDownError,
  network_unavailable: NetworkUnavailableError,
};
