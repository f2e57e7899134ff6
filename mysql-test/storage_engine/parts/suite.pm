package My::Suite::TidesDB_storage_engine;
@ISA = qw(My::Suite);

# The plugin declares a maturity below the server's (README, "Maturity"); the server
# says so at every start.
push @::global_suppressions,
  (
     qr(Plugin 'TidesDB' is of maturity level [a-z]+ while the server is stable),
  );

bless { };
