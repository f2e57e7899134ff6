package My::Suite::TidesDB_galera;

# Galera clusters on this machine (the server's galera_2nodes.cnf and
# galera_3nodes.cnf), TidesDB the default engine. The galera suite's checks and
# suppressions apply: wsrep::common finds the provider (libgalera_smm.so).
use warnings;
use lib 'suite';
use wsrep::common;
use Cwd 'abs_path';
use File::Basename;

@ISA = qw(My::Suite);

return wsrep_not_ok() if wsrep_not_ok();
return "mariadb-backup (the state transfer method) is not installed"
  unless `sh -c "command -v mariadb-backup"`;

# The nodes' SST method (tidesdb.cnf) is the project's tools/sst/wsrep_sst_tidesdb,
# found by the server in PATH as it finds its own wsrep_sst_* scripts; this
# suite folder is mounted from the project's mysql-test/.
my $sst_dir = abs_path(dirname(abs_path(__FILE__)) . "/../../tools/sst");
return "wsrep_sst_tidesdb not found at $sst_dir" unless -x "$sst_dir/wsrep_sst_tidesdb";
$ENV{PATH} = "$sst_dir:$ENV{PATH}";

push @::global_suppressions,
  (
     qr(Plugin '[A-Za-z_]+' is of maturity level [a-z]+ while the server is stable),
     qr(WSREP: wsrep_sst_receive_address is set to '127\.0\.0\.1),
     qr(WSREP: Could not open saved state file for reading: ),
     qr(WSREP: Could not open state file for reading: ),
     qr(WSREP: Gap in state sequence\. Need state transfer\.),
     qr(WSREP: Failed to prepare for incremental state transfer:),
     qr(WSREP: .*down context.*),
     qr(WSREP: Failed to send state UUID:),
     qr(WSREP: last inactive check more than .+ skipping check),
     qr(WSREP: Releasing seqno [0-9]+ before [0-9]+ was assigned\.),
     qr|WSREP: access file\(.*gvwstate.dat\) failed ?\(No such file or directory\)|,
     qr(WSREP: Quorum: No node with complete state),
     qr(WSREP: Initial position was provided by configuration or SST, avoiding override),
     qr|WSREP: discarding established \(time wait\) |,
     qr(WSREP: evs::proto.*),
     qr(WSREP: no nodes coming from prim view, prim not possible),
     qr(WSREP: user message in state LEAVING),
     qr(WSREP: .* sending install message failed: (Transport endpoint|Socket) is not connected),
     qr(WSREP: .* sending install message failed: Resource temporarily unavailable),
     qr(WSREP: Could not find peer:),
     qr|WSREP: gcs_caused\(\) returned |,
     qr|WSREP: Protocol violation\. JOIN message sender .+ ?is not in state transfer \(SYNCED\)\. Message ignored\.|,
     qr|WSREP: Protocol violation\. JOIN message sender .+ ?is not in state transfer \(JOINED\)\. Message ignored\.|,
     qr(WSREP: Action message in non-primary configuration from member [0-9]*),
     qr(WSREP: Last Applied Action message in non-primary configuration from member [0-9]*),
     qr(WSREP: discarding established ),
     qr|WSREP: .*core_handle_uuid_msg|,
     qr|WSREP: JOIN message from member .+ ?in non-primary configuration\. Ignored\.|,
     qr(WSREP: Failed to remove page file ),
     qr+WSREP: Sending JOIN failed: -107 \((Transport endpoint|Socket) is not connected\)\. Will retry in new primary component\.+,
     qr|WSREP: Trying to continue unpaused monitor|,
     qr|WSREP: Failed to report last committed|,
     qr|bytes freed by|,
     qr|WSREP: Member .* requested state transfer from .* but it is impossible to select State Transfer donor|,
  );

bless { };
