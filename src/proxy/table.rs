//! Tables of lists the watch cache answers: the list is taken in the
//! consumer's terms from the cache, as for a JSON list, and rendered into the
//! Table kube-apiserver would give ([`crate::table`]) with the consumer's
//! schema; each row is kept by the cache per object per change (all but its
//! dates, written at the request), so a Table of unchanged objects is a join
//! of rows made before. Whatever it cannot render exactly (a column path it
//! does not evaluate as Go, a Table without headers, v1beta1, protobuf) and
//! every list the cache cannot answer goes to the provider as before.

use super::Exchange;
use crate::forward::encode::Failure;
use crate::table::{Columns, table_of_rows};
use crate::translate::request::ProviderRequest;
use crate::upstream::RowMaker;
use crate::wire::accept::{Media, MetaVersion, Target};
use http::Response;
use std::time::SystemTime;

impl Exchange<'_> {
    /// The Table of this list rendered from the cache, or `None` to ask the
    /// provider for it.
    pub(super) async fn table_from_cache(
        &self,
        provider: &ProviderRequest,
    ) -> Result<Option<Response<crate::upstream::BoxBody>>, Failure> {
        let Target::Table(MetaVersion::V1) = self.request.output.target else {
            return Ok(None);
        };
        let Ok(options) = &self.request.table else {
            return Ok(None);
        };
        if options.no_headers || self.request.output.media == Media::Protobuf {
            return Ok(None);
        }
        let Ok(columns) = Columns::of(&self.served.spec, &self.resource.version) else {
            return Ok(None);
        };
        // The same list, asked of the cache as a plain JSON list.
        let mut list = provider.clone();
        list.accept = "application/json".into();
        list.query.retain(|(key, _)| key != "includeObject");
        let sent = self.build(&list)?;
        let scope = self.identity_scope();
        let read = self.cache_read(&list, &sent, scope.as_deref());
        let translation = self.translation();
        // Rows the cache makes and keeps per object per change.
        let rows = RowMaker {
            columns: &columns,
            include: options.include_object,
        };
        let Some(rows) = self
            .proxy
            .upstream
            .rows_translated(&read, &translation, &rows)
            .await
        else {
            return Ok(None);
        };
        let Ok(table) = table_of_rows(&columns, &rows.metadata, &rows.rows, SystemTime::now())
        else {
            return Ok(None);
        };
        // Compact JSON as it is; any other form (YAML, pretty) encoded
        // from it as every answer is.
        self.store().translated(200, &table, Vec::new()).map(Some)
    }
}
