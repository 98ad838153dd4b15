// The host's interfaces, imported once, here: the only module that names the contract version.
// componentize-js resolves these specifiers to the component's imports; the unit tests map them
// to recorders (tests/stub-host.js).
export * as hostInfo from "factbuoy:plugin/host-info@0.2.0";
export * as logging from "factbuoy:plugin/logging@0.2.0";
export * as output from "factbuoy:plugin/output@0.2.0";
export * as progress from "factbuoy:plugin/progress@0.2.0";
export * as preopens from "wasi:filesystem/preopens@0.2.12";
