//! What ships: the image built from the Dockerfile's final stage and run as real containers,
//! the crate as a crate user gets it (rust-version, the lean library, the package's files), and
//! the version and commit the binary names.
//! scripts/test.sh runs this target alone and first: its static release build and its lean
//! library build would load the machine under the timing tests of the others.

mod image;
mod package;
mod version;
