//! rqvs-classify (being written).
