// Errors of the driver registry, in their own module so that driver loaders can throw them without
// importing the registry that imports them.

/** A driver that cannot be had here, with a stable code and a message a person can act on. */
export class DriverUnavailable extends Error {
  constructor(
    readonly code: 'DRIVER_UNKNOWN' | 'DRIVER_MODULE_MISSING' | 'DRIVER_NOT_BUILT',
    message: string,
  ) {
    super(message);
    this.name = 'DriverUnavailable';
  }
}
