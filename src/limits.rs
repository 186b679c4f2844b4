//! Hard bounds.
