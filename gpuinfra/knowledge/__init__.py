"""Knowledge tables: GPU models, MIG profiles, topology profiles, driver branches, vendor
repositories."""
