//! The door for other test targets into the model's files: the `lua_mirror` target compares
//! the model's mirror of the scripts with the real scripts, and reaches it through here.

pub mod mirror;
pub mod values;
