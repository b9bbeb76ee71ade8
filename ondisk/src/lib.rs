//! Strata's on-disk formats, shared by the server and the offline tools.
